// Failures as gRPC status codes: the HTTP layer's statuses mapped the way Triton maps its errors (a bad request
// INVALID_ARGUMENT, an unknown model NOT_FOUND, a full queue or a server not ready UNAVAILABLE, an id already in use
// ALREADY_EXISTS), message unchanged — except that a status message always fits in the grpc-message trailer.
import { type ServiceError, status } from '@grpc/grpc-js';

import { toHttpError } from '../http-errors.js';

const CODE_BY_HTTP: Readonly<Record<number, status>> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  404: status.NOT_FOUND,
  405: status.UNIMPLEMENTED,
  409: status.ALREADY_EXISTS,
  413: status.RESOURCE_EXHAUSTED,
  499: status.CANCELLED,          // the client went away first (prompt-bounds.ts)
  503: status.UNAVAILABLE,
};

/**
 * The most a status message may take once percent-encoded into the grpc-message trailer. grpc-js sends a trailer
 * of any size, but a peer takes only so much (a grpc-js client about 64 KiB of headers, a C-core client — Python,
 * C++ — 8 KiB by default): a larger one is never delivered, the call never gets its status, and the HTTP/2
 * connection stalls with every other call on it. Messages echo client names cut short (quote-value.ts); this is
 * the backstop for whatever else grows long.
 */
export const MAX_STATUS_MESSAGE_BYTES = 4096;

export interface GrpcFailure { code: status; details: string; internal: boolean }

export function grpcFailure(error: unknown): GrpcFailure {
  const http = toHttpError(error);
  const code = CODE_BY_HTTP[http.status] ?? status.INTERNAL;
  return { code, details: http.message, internal: code === status.INTERNAL };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `details` cut so that grpc-js's encodeURI of it fits MAX_STATUS_MESSAGE_BYTES (a lone surrogate, which encodeURI
 * throws on, becomes U+FFFD). */
export function trailerSafe(details: string): string {
  const text = details.replace(LONE_SURROGATE, '\uFFFD');
  if (encodeURI(text).length <= MAX_STATUS_MESSAGE_BYTES) return text;
  const note = ` … (cut: the message has ${text.length} characters)`;
  let budget = MAX_STATUS_MESSAGE_BYTES - encodeURI(note).length;
  let end = 0;
  for (const ch of text) {   // whole code points, so no surrogate pair is split
    budget -= encodeURI(ch).length;
    if (budget < 0) break;
    end += ch.length;
  }
  return text.slice(0, end) + note;
}

/** The error object grpc-js turns into the call's status. */
export function serviceError(failure: GrpcFailure): Partial<ServiceError> {
  const details = trailerSafe(failure.details);
  return { code: failure.code, details, message: details };
}
