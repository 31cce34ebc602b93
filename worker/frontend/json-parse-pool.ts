// Large JSON bodies are parsed on the frontend's worker thread: parsing an 8 MiB prompt on the event loop held every
// other request, health checks included, for ~30 ms (bench/RESULTS.md, issue 23). Bodies under
// PARSE_OFF_THREAD_BYTES parse inline: for them, the round trip to the thread costs more than the parse. The same
// checks and messages as parseJsonObject either way.
import { offload, offloaded } from './frontend-thread-pool.js';
import { parseJsonObject } from './http-body.js';

/** 256 KiB: JSON.parse takes about a millisecond per MiB here, so below this the thread saves under 0.3 ms. */
export const PARSE_OFF_THREAD_BYTES = 256 * 1024;

/** Bodies parsed on the thread so far (tests check that large bodies go there). */
export function offThreadParses(): number {
  return offloaded.parse;
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
  const owns = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer;
  const bytes = owns ? new Uint8Array(body.buffer, 0, body.byteLength) : new Uint8Array(body);  // (a copy when shared)
  return offload<Record<string, unknown>>({ kind: 'parse', body: bytes }, [bytes.buffer as ArrayBuffer]);
}
