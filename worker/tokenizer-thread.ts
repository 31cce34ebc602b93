// One thread of the tokenizer pool (tokenizer-pool.ts): loads the checkpoint's tokenizer once, then encodes and
// decodes the slices the pool sends, so a long prompt costs this thread's time and never the event loop's.
import { parentPort, workerData } from 'node:worker_threads';

import { loadTokenizer } from './tokenizer.js';

export interface ThreadData {
  modelDir: string;
  hold: SharedArrayBuffer;   // Int32 [0]: non-zero while a test holds every slice before it runs (the pool's test hold)
}

export type SliceRequest =
  | { id: number; encode: { texts: string[]; special: boolean[]; limits: number[] } }  // limit -1: none
  | { id: number; decode: number[][] };

/** Per text: its ids, or (over the limit) only how many there were, so a hopeless prompt's ids never cross over. */
export type EncodedText = Int32Array | { count: number };

export type ThreadMessage =
  | { type: 'ready' }
  | { type: 'failed'; message: string }
  | { type: 'held'; id: number }
  | { type: 'done'; id: number; encoded?: EncodedText[]; decoded?: string[] }
  | { type: 'error'; id: number; message: string };

const port = parentPort!;
const data = workerData as ThreadData;
const hold = new Int32Array(data.hold);

function serve(tokenizer: ReturnType<typeof loadTokenizer>, request: SliceRequest): void {
  if (Atomics.load(hold, 0) !== 0) {
    port.postMessage({ type: 'held', id: request.id } satisfies ThreadMessage);
    // Blocks this thread only: that it is blocked while the main thread answers others is what a test asserts.
    while (Atomics.load(hold, 0) !== 0) Atomics.wait(hold, 0, Atomics.load(hold, 0));
  }
  try {
    if ('encode' in request) {
      const { texts, special, limits } = request.encode;
      const encoded: EncodedText[] = texts.map((text, i) => {
        const ids = tokenizer.encode(text, { addSpecialTokens: special[i]! });
        return limits[i]! >= 0 && ids.length > limits[i]! ? { count: ids.length } : Int32Array.from(ids);
      });
      const buffers = encoded.flatMap((e) => (e instanceof Int32Array ? [e.buffer as ArrayBuffer] : []));
      port.postMessage({ type: 'done', id: request.id, encoded } satisfies ThreadMessage, buffers);
    } else {
      port.postMessage({ type: 'done', id: request.id, decoded: request.decode.map((ids) => tokenizer.decode(ids)) } satisfies ThreadMessage);
    }
  } catch (error) {
    port.postMessage({ type: 'error', id: request.id, message: (error as Error).message } satisfies ThreadMessage);
  }
}

try {
  const tokenizer = loadTokenizer(data.modelDir);
  port.on('message', (request: SliceRequest) => serve(tokenizer, request));
  port.postMessage({ type: 'ready' } satisfies ThreadMessage);
} catch (error) {
  port.postMessage({ type: 'failed', message: (error as Error).message } satisfies ThreadMessage);
}
