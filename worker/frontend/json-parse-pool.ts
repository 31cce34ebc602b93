// Large JSON bodies are parsed on a worker thread: parsing an 8 MiB prompt on the event loop held every other
// request, health checks included, for ~30 ms (bench/RESULTS.md, issue 23). Bodies under PARSE_OFF_THREAD_BYTES
// parse inline: for them, the round trip to the thread costs more than the parse. One thread, started on first
// use, holding the process open only while it has bodies to parse; the same checks and messages as
// parseJsonObject either way.
import { Worker } from 'node:worker_threads';

import { parseJsonObject } from './http-body.js';
import { HttpError } from './http-errors.js';
import type { ParseReply, ParseRequest } from './json-parse-thread.js';

/** 256 KiB: JSON.parse takes about a millisecond per MiB here, so below this the thread saves under 0.3 ms. */
export const PARSE_OFF_THREAD_BYTES = 256 * 1024;

let thread: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }>();
/** Bodies parsed on the thread so far (tests check that large bodies go there). */
export let offThreadParses = 0;

function start(): Worker {
  const w = new Worker(new URL('./json-parse-thread.js', import.meta.url));
  w.on('message', (reply: ParseReply) => {
    const waiter = waiting.get(reply.id);
    if (!waiter) return;
    waiting.delete(reply.id);
    if (waiting.size === 0) w.unref();
    if ('value' in reply) waiter.resolve(reply.value);
    else waiter.reject(new HttpError(reply.status, reply.message));
  });
  // A thread that dies fails what it held; the next body starts a new one.
  const fail = (error: Error) => {
    if (thread === w) thread = undefined;
    for (const [id, waiter] of waiting) {
      waiting.delete(id);
      waiter.reject(new Error(`the JSON parsing thread stopped: ${error.message}`));
    }
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`exit code ${code}`)));
  w.unref();  // idle (after the listeners: attaching 'message' refs the thread again)
  return w;
}

/** parseJsonObject, on the thread for large bodies. The body is handed over (transferred) when it owns its memory. */
export function parseJsonBody(body: Buffer): Promise<Record<string, unknown>> {
  if (body.length < PARSE_OFF_THREAD_BYTES) {
    try {
      return Promise.resolve(parseJsonObject(body));
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }
  thread ??= start();
  const id = nextId++;
  offThreadParses += 1;
  const owns = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer;
  const bytes = owns ? new Uint8Array(body.buffer, 0, body.byteLength) : new Uint8Array(body);  // (a copy when shared)
  return new Promise((resolve, reject) => {
    if (waiting.size === 0) thread!.ref();  // a body in flight keeps the process alive until its answer
    waiting.set(id, { resolve, reject });
    thread!.postMessage({ id, body: bytes } satisfies ParseRequest, [bytes.buffer as ArrayBuffer]);
  });
}
