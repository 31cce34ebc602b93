// Triton's early stop: a request carrying `stop: true` and the id of a running request cancels it. This maps the
// client-chosen ids of running requests to their cancel functions.
export class RequestRegistry {
  private readonly byId = new Map<string, Set<() => void>>();

  /** Remembers a running request; returns the function that forgets it when it ends. */
  register(id: string | undefined, cancel: () => void): () => void {
    if (id === undefined || id === '') return () => {};
    let set = this.byId.get(id);
    if (!set) this.byId.set(id, (set = new Set()));
    set.add(cancel);
    return () => {
      set.delete(cancel);
      if (set.size === 0 && this.byId.get(id) === set) this.byId.delete(id);
    };
  }

  /** Cancels every running request with this id; returns how many there were. */
  stop(id: string): number {
    const set = this.byId.get(id);
    if (!set) return 0;
    for (const cancel of [...set]) cancel();
    return set.size;
  }
}
