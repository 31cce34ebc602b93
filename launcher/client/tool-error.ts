// The one error the client and bench tools raise for what the user can fix (a bad flag value, an unreachable
// server, a rejected request): the command prints its message alone and exits 2, no stack trace. A run that
// started and then failed (the server died under a benchmark) exits 1 instead, as a failed perf gate does.
export class ToolError extends Error {
  constructor(message: string, readonly exitCode = 2) {
    super(message);
    this.name = 'ToolError';
  }
}
