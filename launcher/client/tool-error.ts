// The one error the client and bench tools raise for what the user can fix (a bad flag value, an unreachable
// server, a rejected request): the command prints its message alone and exits 2, no stack trace.
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}
