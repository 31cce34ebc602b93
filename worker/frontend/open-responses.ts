// The HTTP responses a server has in flight, so a drain can close the port only once the last answers — a stream's
// final event among them — have been written and ended: waiting on those events, never on a guess of how long
// writing takes. While draining, every answer also closes its connection, so keep-alive clients reconnect
// (and find the port closed once the drain is over) instead of sending more on a connection about to go.
import { once } from 'node:events';
import type { Server, ServerResponse } from 'node:http';

export class OpenResponses {
  private readonly open = new Set<ServerResponse>();
  private draining = false;

  constructor(server: Server) {
    // Before the route handler (prepend), so the connection header is set before any handler writes the head.
    server.prependListener('request', (_req, res: ServerResponse) => {
      this.open.add(res);
      if (this.draining) res.setHeader('connection', 'close');
      res.once('close', () => this.open.delete(res));
    });
  }

  get size(): number {
    return this.open.size;
  }

  beginDrain(): void {
    this.draining = true;
  }

  /** Resolves once every response open now has ended (written in full, or its client went away). */
  async settled(): Promise<void> {
    await Promise.all([...this.open].map((res) => (res.closed ? undefined : once(res, 'close'))));
  }
}
