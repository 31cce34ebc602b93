// JSON answers that may carry logits (Float32Arrays): the text of a logits tensor is about five times its bytes
// (a float32 printed as the shortest double that reads back exactly, as Triton writes it), and JSON.stringify of it
// would build a JS number per value, then the whole text at once, then its bytes — for 1,000 prompt tokens x 8k vocab
// about 1 GB — while blocking the event loop for seconds. Here a logits tensor is printed a slice at a time, each
// slice written before the next is made: the event loop answers others between slices (a health check waits for one
// slice, not for the answer), a client that reads slowly holds the writer back (the socket's backpressure) instead of
// the text piling up in memory, and an answer without logits goes out exactly as sendJson sends it. Tensors larger
// than a thread slice are printed on the frontend's worker thread (frontend-thread.ts): printing on the event loop,
// even a slice at a time, kept it busy for the whole answer (13 s for 268 MB), so every other request waited on it.
import type { ServerResponse } from 'node:http';
import { finished } from 'node:stream';

import { offload } from './frontend-thread-pool.js';
import { sendJson } from './http-server.js';
import { logitsText } from './logits-text.js';
import { writeEvent } from './sse.js';

const SLICE_VALUES = 1024;          // printed on the event loop: ~0.2 ms, what another request may wait behind
const THREAD_SLICE_VALUES = 16384;  // printed on the frontend thread: 64 KiB copied in, ~300 KB of text back
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

/**
 * The JSON text of `value` as text pieces and whole logits tensors (each to be printed as a JSON array of
 * numbers). For the shapes answers have: plain objects, arrays, strings, numbers, booleans, null.
 */
function* jsonParts(value: unknown): Generator<string | Float32Array> {
  if (value instanceof Float32Array) { yield value; return; }
  if (!holdsLogits(value)) { yield JSON.stringify(value) ?? 'null'; return; }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) {
      yield i === 0 ? '[' : ',';
      const v: unknown = value[i];
      yield* jsonParts(v === undefined || typeof v === 'function' ? null : v);
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
    yield* jsonParts(v);
  }
  yield '}';
}

/**
 * The JSON text of `value` in pieces, each logits tensor a slice at a time, printed here; joined, exactly
 * JSON.stringify's text of the same value with every Float32Array as an array.
 */
export function* jsonPieces(value: unknown): Generator<string> {
  for (const part of jsonParts(value)) {
    if (typeof part === 'string') { yield part; continue; }
    if (part.length === 0) { yield '[]'; continue; }
    for (let at = 0; at < part.length; at += SLICE_VALUES) {
      yield (at === 0 ? '[' : ',') + logitsText(part.subarray(at, at + SLICE_VALUES));
    }
    yield ']';
  }
}

// One slice of a large tensor printed on the frontend thread (a copy goes there: the engine's buffer stays here), as
// ASCII bytes; printed here if the thread is gone.
async function printOffThread(values: Float32Array): Promise<Buffer> {
  const copy = values.slice();
  try {
    const bytes = await offload<Uint8Array>({ kind: 'print', values: copy }, [copy.buffer]);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  } catch {
    return Buffer.from(logitsText(values), 'latin1');
  }
}

// Writes the parts, letting the event loop run between slices and waiting while the socket is full; false once the
// client has gone away. A tensor larger than one thread slice is printed on the frontend thread, the next slice
// while this one is written.
async function writePieces(res: ServerResponse, parts: Iterable<string | Float32Array>): Promise<boolean> {
  let pending = '';
  // Writes what is pending (and `bytes` after it), then gives the event loop a turn (a socket that takes every write
  // at once emits 'drain' from a tick, which would never let it poll) and, while the socket is full, waits for room.
  const flush = async (bytes?: Buffer): Promise<void> => {
    if (pending !== '') res.write(pending);
    if (bytes !== undefined) res.write(bytes);
    pending = '';
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (res.writableNeedDrain && !res.destroyed) await drained(res);
  };
  const add = async (piece: string): Promise<void> => {
    pending += piece;
    if (pending.length >= FLUSH_CHARS) await flush();
  };
  for (const part of parts) {
    if (res.destroyed) return false;
    if (typeof part === 'string') { await add(part); continue; }
    if (part.length <= THREAD_SLICE_VALUES) {
      for (const piece of jsonPieces(part)) {
        if (res.destroyed) return false;
        await add(piece);
      }
      continue;
    }
    let next = printOffThread(part.subarray(0, THREAD_SLICE_VALUES));
    for (let at = 0; at < part.length; at += THREAD_SLICE_VALUES) {
      const bytes = await next;
      const after = at + THREAD_SLICE_VALUES;
      if (after < part.length && !res.destroyed) next = printOffThread(part.subarray(after, after + THREAD_SLICE_VALUES));
      if (res.destroyed) return false;
      pending += at === 0 ? '[' : ',';
      await flush(bytes);
    }
    await add(']');
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
  if (await writePieces(res, jsonParts(body))) res.end();
}

/** writeEvent for events that may carry logits; false once the client has gone away. */
export async function writeAnswerEvent(res: ServerResponse, data: unknown): Promise<boolean> {
  if (!holdsLogits(data)) return writeEvent(res, data);
  if (res.destroyed || res.writableEnded) return false;
  res.write('data: ');
  if (!(await writePieces(res, jsonParts(data)))) return false;
  res.write('\n\n');
  return true;
}

/** Settles once the answer is written or the client has gone (also when that happened already). */
export function answerSettled(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => { finished(res, () => resolve()); });
}
