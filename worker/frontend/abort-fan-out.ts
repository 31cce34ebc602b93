// One client request that runs many engine requests (OpenAI's prompts x n choices, a KServe batch) listens on the
// client's abort signal once and hands each engine request a signal of its own. Every engine request listening on
// the one signal put n listeners on it, and past 10 Node printed a MaxListenersExceededWarning for each such
// request: a log line any client could ask for, and no leak to warn about (the signal dies with the request).
export class AbortFanOut {
  private readonly children: AbortController[] = [];

  constructor(private readonly parent: AbortSignal) {
    parent.addEventListener('abort', this.abort, { once: true });
  }

  /** A signal for one more engine request: aborted with the client's (at once if that already is), or by abort(). */
  child(): AbortSignal {
    const controller = new AbortController();
    if (this.parent.aborted) controller.abort();
    this.children.push(controller);
    return controller.signal;
  }

  /** Aborts every engine request handed a signal so far (the client left, or a later one failed to start). */
  readonly abort = (): void => {
    this.parent.removeEventListener('abort', this.abort);
    for (const controller of this.children) controller.abort();
  };
}
