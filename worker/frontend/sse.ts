// Server-sent events, the framing both generate_stream and OpenAI's stream=true use: one `data:` line per event.
import type { ServerResponse } from 'node:http';

export function startEventStream(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',  // proxies must not hold tokens back
  });
  res.flushHeaders();
}

/** Writes one event; returns false once the client has gone away, so producers can stop. */
export function writeEvent(res: ServerResponse, data: unknown): boolean {
  if (res.destroyed || res.writableEnded) return false;
  res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  return true;
}

export function endEventStream(res: ServerResponse): void {
  if (!res.writableEnded) res.end();
}
