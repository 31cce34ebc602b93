// Pure frontend tests of KServe inputs: named tensors from JSON fields as an HTTP body brings them, and the 400 a
// reader throws for a bad one.
import { HttpError } from '../../worker/frontend/http-errors.js';
import { fromJsonField, type NamedValues } from '../../worker/frontend/named-values.js';

export const jsonInputs = (fields: Record<string, unknown>): NamedValues =>
  new Map(Object.entries(fields).map(([k, v]) => [k, fromJsonField(k, v)]));

/** The 400 `fn` throws: its message and the field it names; undefined when it throws nothing. */
export function refusal(fn: () => unknown): { message: string; param: string | undefined } | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError && error.status === 400) return { message: error.message, param: error.param };
    throw error;
  }
  return undefined;
}
