// The frontend's worker thread (frontend-thread-pool.ts): the request-sized work that would otherwise hold the
// event loop — checking and parsing large request bodies (an 8 MiB body: the depth scan, UTF-8 decoding and
// JSON.parse, tens of milliseconds) and printing large logits tensors as JSON text (~0.2 us a value: 13 s for a
// 268 MB context-logits answer). The event loop keeps only the copies in and out.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';

import { parseJsonObject } from './http-body.js';
import { HttpError } from './http-errors.js';
import { logitsText } from './logits-text.js';

export type ThreadTask =
  | { kind: 'parse'; body: Uint8Array }      // -> the JSON object
  | { kind: 'print'; values: Float32Array }; // -> its values as JSON numbers, comma-separated, as bytes (ASCII)
export type ThreadReply =
  | { id: number; value: unknown }
  | { id: number; status: number; message: string };

const encoder = new TextEncoder();

// The reply and the buffers it hands over (printed text goes back as bytes in memory of its own, moved, not copied:
// the event loop writes them to the socket as they are, with no string to copy or encode).
function perform(task: ThreadTask): { value: unknown; transfer: ArrayBuffer[] } {
  if (task.kind === 'parse') return { value: parseJsonObject(Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength)), transfer: [] };
  const text = logitsText(task.values);
  const bytes = new Uint8Array(text.length);  // (numbers, commas and "null": one byte a character)
  encoder.encodeInto(text, bytes);
  return { value: bytes, transfer: [bytes.buffer] };
}

// A lower priority for this thread alone (Linux nice is per thread; pid 0 is the calling thread): where cores are
// few, a long parse or print here must not take the CPU from the event loop, which only needs it in short turns.
// Nice 10 (about a tenth of a nice-0 thread's share when both want a core), not 19: the CPU backend's engine threads
// keep every core busy while they generate, and at 19 (1.5%) a body's parse would wait seconds behind them.
try {
  setPriority(10);
} catch {
  // (a platform without per-thread priorities: the thread runs at the process's)
}

const port = parentPort!;
port.on('message', ({ id, task }: { id: number; task: ThreadTask }) => {
  try {
    const { value, transfer } = perform(task);
    port.postMessage({ id, value } satisfies ThreadReply, transfer);
  } catch (error) {
    const status = error instanceof HttpError ? error.status : 500;
    port.postMessage({ id, status, message: (error as Error).message } satisfies ThreadReply);
  }
});
