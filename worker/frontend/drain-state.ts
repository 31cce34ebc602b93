// Whether a server is draining, and the words it answers with meanwhile. One object per server, shared by the
// HTTP routes (through each model's ServingContext) and the gRPC service, so every interface refuses new work with
// the same reason while the ports stay open: a client, a load balancer or Kubernetes sees "draining (SIGTERM)"
// with a 503 / UNAVAILABLE it can act on (retry elsewhere), never a refused connection it cannot tell from a crash.

export class DrainState {
  private cause: string | undefined;

  /** Starts the drain (once; a second call keeps the first cause). `cause`: what asked for it, e.g. "SIGTERM". */
  begin(cause: string): void {
    this.cause ??= cause;
  }

  get draining(): boolean {
    return this.cause !== undefined;
  }

  /** While draining: why a new request is refused; undefined otherwise. */
  refusal(): string | undefined {
    return this.cause === undefined ? undefined : drainRefusal(this.cause);
  }

  /** The error a request still running at the drain deadline ends with (see Executor.drain). */
  deadlineMessage(timeoutMs: number): string {
    return drainDeadlineMessage(this.cause ?? 'shutdown', timeoutMs);
  }
}

export function drainRefusal(cause: string): string {
  return `the server is draining (${cause}): not accepting new requests`;
}

export function drainDeadlineMessage(cause: string, timeoutMs: number): string {
  return `the request was cancelled before it finished: the server is draining (${cause}) and its drain timeout ` +
    `(--drain-timeout ${timeoutMs / 1000} s) ran out`;
}
