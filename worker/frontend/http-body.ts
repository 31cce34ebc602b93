// Reads a request body under a size limit and parses it as JSON, so no route can be made to buffer without bound.
import type { IncomingMessage } from 'node:http';

import { HttpError } from './http-errors.js';

export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) {
    return Promise.reject(tooLarge(declared, limitBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        reject(tooLarge(size, limitBytes));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function tooLarge(size: number, limit: number): HttpError {
  return new HttpError(413, `request body of ${size} bytes exceeds the limit of ${limit} bytes (--max-body-bytes)`);
}

/** Parses a JSON object body; anything else is a 400 that says what was received. */
export function parseJsonObject(body: Buffer): Record<string, unknown> {
  if (body.length === 0) throw new HttpError(400, 'the request body is empty; expected a JSON object');
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
