// JSON answers that may carry logits (Float32Arrays): the text of a logits tensor is about five times its bytes
// (a float32 printed as the shortest double that reads back exactly, as Triton writes it), and JSON.stringify of it
// would build a JS number per value, then the whole text at once, then its bytes — for 1,000 prompt tokens x 8k vocab
// about 1 GB — while blocking the event loop for seconds. Here a logits tensor is printed a slice at a time, each
// slice written before the next is made: the event loop answers others between slices (a health check waits for one
// slice, not for the answer), a client that reads slowly holds the writer back (the socket's backpressure) instead of
// the text piling up in memory, and an answer without logits goes out exactly as sendJson sends it.
import type { ServerResponse } from 'node:http';
import { finished } from 'node:stream';

import { sendJson } from './http-server.js';
import { writeEvent } from './sse.js';

const SLICE_VALUES = 1024;          // ~0.2 ms of printing: what another request may wait behind
const FLUSH_CHARS = 16 * 1024;      // small pieces (keys, brackets) go out together

/** Whether `value` holds a Float32Array anywhere (only then is it written a slice at a time). */
export function holdsLogits(value: unknown): boolean {
  if (value instanceof Float32Array) return true;
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object' && holdsLogits(v)) return true;
    return false;
  }
  for (const v of Object.values(value)) if (v !== null && typeof v === 'object' && holdsLogits(v)) return true;
  return false;
}

// One slice of logits as JSON numbers: what JSON.stringify writes for them, non-finite values (a masked logit is
// -Infinity) as null.
function sliceText(values: Float32Array): string {
  const text = values.join(',');
  return text.includes('N') || text.includes('I') ? text.replace(/-?Infinity|NaN/g, 'null') : text;
}

/**
 * The JSON text of `value` in pieces, each logits tensor a slice at a time; joined, exactly JSON.stringify's text of
 * the same value with every Float32Array as an array. For the shapes answers have: plain objects, arrays, strings,
 * numbers, booleans, null.
 */
export function* jsonPieces(value: unknown): Generator<string> {
  if (value instanceof Float32Array) {
    if (value.length === 0) { yield '[]'; return; }
    for (let at = 0; at < value.length; at += SLICE_VALUES) {
      yield (at === 0 ? '[' : ',') + sliceText(value.subarray(at, at + SLICE_VALUES));
    }
    yield ']';
    return;
  }
  if (!holdsLogits(value)) { yield JSON.stringify(value) ?? 'null'; return; }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) {
      yield i === 0 ? '[' : ',';
      const v: unknown = value[i];
      yield* jsonPieces(v === undefined || typeof v === 'function' ? null : v);
    }
    yield ']';
    return;
  }
  let first = true;
  yield '{';
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === undefined || typeof v === 'function') continue;
    yield `${first ? '' : ','}${JSON.stringify(key)}:`;
    first = false;
    yield* jsonPieces(v);
  }
  yield '}';
}

// Writes the pieces, letting the event loop run between slices and waiting while the socket is full; false once the
// client has gone away.
async function writePieces(res: ServerResponse, pieces: Iterable<string>): Promise<boolean> {
  let pending = '';
  for (const piece of pieces) {
    if (res.destroyed) return false;
    pending += piece;
    if (pending.length < FLUSH_CHARS) continue;
    res.write(pending);
    pending = '';
    // Always back to the event loop (a socket that takes every write at once emits 'drain' from a tick, which would
    // never let it poll); then, while the socket is full, wait until it has room.
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (res.writableNeedDrain && !res.destroyed) await drained(res);
  }
  if (res.destroyed) return false;
  if (pending !== '') res.write(pending);
  return true;
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/** sendJson for answers that may carry logits: those are written a slice at a time (chunked, no content-length). */
export async function sendAnswer(res: ServerResponse, status: number, body: unknown): Promise<void> {
  if (!holdsLogits(body) || res.headersSent) return sendJson(res, status, body);
  res.writeHead(status, { 'content-type': 'application/json' });
  if (await writePieces(res, jsonPieces(body))) res.end();
}

/** writeEvent for events that may carry logits; false once the client has gone away. */
export async function writeAnswerEvent(res: ServerResponse, data: unknown): Promise<boolean> {
  if (!holdsLogits(data)) return writeEvent(res, data);
  if (res.destroyed || res.writableEnded) return false;
  res.write('data: ');
  if (!(await writePieces(res, jsonPieces(data)))) return false;
  res.write('\n\n');
  return true;
}

/** Settles once the answer is written or the client has gone (also when that happened already). */
export function answerSettled(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => { finished(res, () => resolve()); });
}
