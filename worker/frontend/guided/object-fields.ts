// The checks every nested request object shares (response_format, tools, tool_choice, messages' tool_calls): is it
// a plain object, and does it hold only the fields we know — an unknown one is named, as the top level does.
import { quoteName } from '../../common/quote-value.js';
import { badRequest } from '../http-errors.js';

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rejects a field of `object` (found at `where`) that is not in `known`, naming it and what is known. */
export function checkFields(object: Record<string, unknown>, known: readonly string[], where: string, param: string): void {
  for (const key of Object.keys(object)) {
    if (!known.includes(key)) throw badRequest(`unknown field ${quoteName(`${where}.${key}`)}; ${where} takes ${known.join(', ')}`, param);
  }
}
