// Tells a server that went away from one that refused a request: after a failed request, the bench asks the
// server whether it still answers at all (health/live over HTTP, ServerLive over gRPC). A refusal (400, 503 while
// draining, a full queue) leaves it answering and the run goes on counting failures; a dead server does not, and
// the run stops rather than fire every remaining request at a closed port and report "0 successful" as a result.
import type { BenchTarget } from './targets.js';

export class ServerWatch {
  /** What happened to the server (its socket error), once it no longer answers. */
  gone: string | undefined;
  firstError: string | undefined;
  private checking: Promise<void> | undefined;

  constructor(private readonly target: Pick<BenchTarget, 'liveness'>) {}

  /** After a failed request: one check at a time (failures meanwhile share it), none once the verdict is in. */
  async afterFailure(error: string): Promise<void> {
    this.firstError ??= error;
    if (this.gone !== undefined) return;
    this.checking ??= this.target.liveness().then((gone) => {
      this.gone ??= gone;
      this.checking = undefined;
    });
    await this.checking;
  }
}
