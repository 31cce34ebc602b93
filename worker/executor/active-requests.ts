// The requests the executor facade has enqueued and not yet routed a final response for, and the drain that waits
// for them to end. The facade sees every response, so it knows the moment the last request ends: a drain resolves
// on that event, with the deadline as one timer — never by polling a count.

export class ActiveRequests<T> {
  private readonly byId = new Map<number, T>();
  private readonly idleWaiters: (() => void)[] = [];
  private cancelOnAdd: ((id: number) => void) | undefined;   // past a drain's deadline, latecomers are cancelled too

  get size(): number {
    return this.byId.size;
  }

  get(id: number): T | undefined {
    return this.byId.get(id);
  }

  add(id: number, value: T): void {
    this.byId.set(id, value);
    this.cancelOnAdd?.(id);
  }

  /** The request's final response has been delivered. */
  finish(id: number): void {
    if (!this.byId.delete(id) || this.byId.size > 0 || this.idleWaiters.length === 0) return;
    // Wake the waiters on the next turn, so every consumer of the final responses (a stream writing its last event)
    // has run first; a request enqueued meanwhile keeps them waiting.
    setImmediate(() => {
      if (this.byId.size > 0) return;
      for (const wake of this.idleWaiters.splice(0)) wake();
    });
  }

  /**
   * Resolves once no request is active: at once, or after the final response of the last one. At `deadline`
   * (epoch ms, Date.now()'s clock) every request still active is cancelled — `onDeadline` hears how many first — and
   * the drain resolves after their final (cancelled) responses.
   */
  async drain(deadline: number, cancel: (id: number) => void, onDeadline?: (remaining: number) => void): Promise<void> {
    if (this.byId.size === 0) return;
    const expire = () => {
      onDeadline?.(this.byId.size);
      this.cancelOnAdd = cancel;
      for (const id of [...this.byId.keys()]) cancel(id);
    };
    const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    const wait = deadline - Date.now();
    let timer: NodeJS.Timeout | undefined;
    if (wait <= 0) expire();
    else timer = setTimeout(expire, wait);
    try {
      await idle;
    } finally {
      clearTimeout(timer);
      this.cancelOnAdd = undefined;
    }
  }
}
