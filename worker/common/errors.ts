// One error class for everything the engine or the facade rejects: `code` is stable (switch on it), the message
// names the field and the value received.
import { clipText } from './quote-value.js';

export type ErrorCode =
  | 'invalid_argument' | 'not_found' | 'bad_checkpoint' | 'unsupported' | 'queue_full' | 'shutdown' | 'internal'
  | 'addon_missing';

export class TrtllmError extends Error {
  readonly code: ErrorCode;
  /** The request field the error is about, in the client's terms, where known (OpenAI's `param`). */
  readonly param: string | undefined;
  constructor(message: string, code: ErrorCode | string, param?: string) {
    super(message);
    this.name = 'TrtllmError';
    this.code = code as ErrorCode;
    this.param = param;
  }
}

/** Renders a received value for an error message: `-1 (number)`, `"abc" (string)`; a long string is cut short:
 * `"xxxx…" (a string of 100000 characters)` (quote-value.ts). */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    const { head, cut } = clipText(value);
    return cut ? `${JSON.stringify(`${head}…`)} (a string of ${value.length} characters)` : `${JSON.stringify(value)} (string)`;
  }
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return `${String(value)} (${typeof value})`;
}
