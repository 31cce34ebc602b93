// The thread of json-parse-pool.ts: checks and parses large request bodies, so an 8 MiB body costs this thread's
// time (the depth scan, UTF-8 decoding and JSON.parse: tens of milliseconds) and the event loop only the structured
// clone of the result.
import { parentPort } from 'node:worker_threads';

import { parseJsonObject } from './http-body.js';
import { HttpError } from './http-errors.js';

export interface ParseRequest { id: number; body: Uint8Array }
export type ParseReply =
  | { id: number; value: Record<string, unknown> }
  | { id: number; status: number; message: string };

const port = parentPort!;
port.on('message', ({ id, body }: ParseRequest) => {
  try {
    const value = parseJsonObject(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
    port.postMessage({ id, value } satisfies ParseReply);
  } catch (error) {
    const status = error instanceof HttpError ? error.status : 500;
    port.postMessage({ id, status, message: (error as Error).message } satisfies ParseReply);
  }
});
