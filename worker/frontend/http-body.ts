// Reads a request body under a size limit and parses it as JSON, so no route can be made to buffer without bound,
// nor to walk a value nested deeper than the frontend's code was written for.
import type { IncomingMessage } from 'node:http';

import { ClientGoneError, HttpError } from './http-errors.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-depth.js';

/** Bodies declaring at least this many bytes are read into one buffer of that size. */
const PREALLOCATE_BYTES = 64 * 1024;

/** The body, whole; `beforeReading` runs once the declared size has passed (where a 100 Continue is sent). */
export function readBody(req: IncomingMessage, limitBytes: number, beforeReading?: () => void): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) {
    return Promise.reject(tooLarge(declared, limitBytes));
  }
  if (req.destroyed) return Promise.reject(new ClientGoneError(`the connection closed before the request body was read`));
  beforeReading?.();
  // A body of declared size is copied into its own buffer as it arrives (each copy a few microseconds), not joined at
  // the end: joining an 8 MiB body held the event loop ~2 ms. Its own memory also lets it move to the parsing thread
  // without a copy (json-parse-pool.ts).
  let whole = Number.isFinite(declared) && declared >= PREALLOCATE_BYTES ? Buffer.allocUnsafeSlow(declared) : undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      if (whole !== undefined && size + chunk.length > whole.length) {
        // More than declared (the HTTP parser does not let that happen): collect chunks from here on.
        chunks.push(whole.subarray(0, size));
        whole = undefined;
      }
      if (whole !== undefined) chunk.copy(whole, size);
      else chunks.push(chunk);
      size += chunk.length;
      if (size > limitBytes) {
        stop();
        reject(tooLarge(size, limitBytes));
      }
    };
    const onEnd = () => {
      stop();
      if (whole !== undefined) resolve(size === whole.length ? whole : whole.subarray(0, size));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    // The connection ended before the body did (a body shorter than its Content-Length, a client gone mid-upload,
    // broken chunked framing): the client's doing, not a server error.
    const onError = (error: Error) => {
      stop();
      reject(new ClientGoneError(`the request body ended early: the connection closed after ${size} bytes${Number.isFinite(declared) ? ` of the ${declared} declared` : ''} (${error.message})`));
    };
    const onClose = () => onError(new Error('closed'));
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function tooLarge(size: number, limit: number): HttpError {
  return new HttpError(413, `request body of ${size} bytes exceeds the limit of ${limit} bytes (--max-body-bytes)`);
}

/** Parses a JSON object body; anything else is a 400 that says what was received. */
export function parseJsonObject(body: Buffer): Record<string, unknown> {
  if (body.length === 0) throw new HttpError(400, 'the request body is empty; expected a JSON object');
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
    throw new HttpError(400, `the request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep (the limit)`);
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new HttpError(400, `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, `the request body must be a JSON object, got ${Array.isArray(value) ? 'an array' : JSON.stringify(value)}`);
  }
  return value as Record<string, unknown>;
}
