// Failures as gRPC status codes: the HTTP layer's statuses mapped the way Triton maps its errors (a bad request
// INVALID_ARGUMENT, an unknown model NOT_FOUND, a full queue or a server not ready UNAVAILABLE), message unchanged.
import { type ServiceError, status } from '@grpc/grpc-js';

import { toHttpError } from '../http-errors.js';

const CODE_BY_HTTP: Readonly<Record<number, status>> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  404: status.NOT_FOUND,
  405: status.UNIMPLEMENTED,
  413: status.RESOURCE_EXHAUSTED,
  499: status.CANCELLED,          // the client went away first (prompt-bounds.ts)
  503: status.UNAVAILABLE,
};

export interface GrpcFailure { code: status; details: string; internal: boolean }

export function grpcFailure(error: unknown): GrpcFailure {
  const http = toHttpError(error);
  const code = CODE_BY_HTTP[http.status] ?? status.INTERNAL;
  return { code, details: http.message, internal: code === status.INTERNAL };
}

/** The error object grpc-js turns into the call's status. */
export function serviceError(failure: GrpcFailure): Partial<ServiceError> {
  return { code: failure.code, details: failure.details, message: failure.details };
}
