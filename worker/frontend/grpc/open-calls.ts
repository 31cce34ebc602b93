// The gRPC calls a server has open, so a drain can stop the port only once every call has ended with its status
// sent — waiting on those events, not on a timer. A ModelStreamInfer call has no natural end while its client keeps
// it open (perf_analyzer, Triton's stream clients), so at the drain each one is told to end as soon as its requests
// in flight are answered: with UNAVAILABLE and the drain's reason, which those clients report as such.

type OnDrain = (refusal: string) => void;

export class OpenCalls {
  private readonly calls = new Set<{ onDrain: OnDrain | undefined }>();
  private readonly idleWaiters: (() => void)[] = [];
  private refusal: string | undefined;

  get size(): number {
    return this.calls.size;
  }

  /** While draining: why a new call is refused. */
  get drainRefusal(): string | undefined {
    return this.refusal;
  }

  /** A call began; `onDrain` hears the drain's reason when it begins. Returns the call's end (idempotent). */
  enter(onDrain?: OnDrain): () => void {
    const entry = { onDrain };
    this.calls.add(entry);
    return () => {
      if (!this.calls.delete(entry) || this.calls.size > 0) return;
      for (const wake of this.idleWaiters.splice(0)) wake();
    };
  }

  beginDrain(refusal: string): void {
    if (this.refusal !== undefined) return;
    this.refusal = refusal;
    for (const call of [...this.calls]) call.onDrain?.(refusal);
  }

  /** Resolves once no call is open. */
  settled(): Promise<void> {
    if (this.calls.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
