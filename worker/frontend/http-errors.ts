// One error type for the HTTP layer, and the mapping from the executor's stable error codes to HTTP statuses, so
// every route reports failures the same way (KServe's {"error": "..."} or OpenAI's {"error": {...}}).
import { TrtllmError } from '../common/errors.js';

export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly param?: string) {
    super(message);
    this.name = 'HttpError';
  }
}

/** The client went away before its request was read (a body shorter than its Content-Length, a connection closed
 * mid-upload): counted with the client errors (400) and logged at debug level, never as a server error — a client
 * that aborts on purpose must not be able to flood the log. Nobody reads the response. */
export class ClientGoneError extends HttpError {
  constructor(message: string) {
    super(400, message);
    this.name = 'ClientGoneError';
  }
}

export const badRequest = (message: string, param?: string): HttpError => new HttpError(400, message, param);
export const notFound = (message: string, param?: string): HttpError => new HttpError(404, message, param);

// Triton answers an executor that cannot take more work with UNAVAILABLE (503); bad parameters are the client's
// fault (400) whether the facade or the engine noticed them.
const STATUS_BY_CODE: Record<string, number> = {
  invalid_argument: 400,
  unsupported: 400,
  not_found: 404,
  queue_full: 503,
  shutdown: 503,
};

export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof TrtllmError) return new HttpError(STATUS_BY_CODE[error.code] ?? 500, error.message, error.param);
  return new HttpError(500, `internal error: ${error instanceof Error ? error.message : String(error)}`);
}

const OPENAI_TYPES: Record<number, string> = {
  400: 'BadRequestError', 401: 'AuthenticationError', 404: 'NotFoundError', 405: 'BadRequestError',
  413: 'BadRequestError', 415: 'BadRequestError', 503: 'ServiceUnavailableError',
};

/** The body of an error response in the style of the API family the route belongs to. */
export function errorBody(error: HttpError, style: 'kserve' | 'openai'): unknown {
  if (style === 'kserve') return { error: error.message };
  return {
    error: {
      message: error.message,
      type: OPENAI_TYPES[error.status] ?? 'InternalServerError',
      param: error.param ?? null,
      code: error.status,
    },
  };
}

const LEADING_FIELD = /^[A-Za-z_][\w.]*/;

/**
 * Runs `fn`, rewording the executor's field names (maxTokens, inputTokenIds, ...) in its errors into the names the
 * client used (max_tokens, request_output_len, ...), so a rejection names what the client actually sent; an error
 * that starts with one of those fields also carries its client name as `param` (`maxTokens must be ...` ->
 * max_tokens; `sampling.topK ...` -> top_k).
 */
export function inClientTerms<T>(fn: () => T, names: Record<string, string>): T {
  try {
    return fn();
  } catch (error) {
    if (!(error instanceof TrtllmError)) throw error;
    let message = error.message;
    for (const [ours, theirs] of Object.entries(names)) message = message.replaceAll(ours, theirs);
    const lead = LEADING_FIELD.exec(error.message)?.[0] ?? '';
    const named = Object.keys(names).some((ours) => lead === ours || lead.startsWith(ours.endsWith('.') ? ours : `${ours}.`));
    throw new TrtllmError(message, error.code, named ? LEADING_FIELD.exec(message)?.[0] : undefined);
  }
}
