// What the tool-call parsers share: the call they produce, and reading the JSON the model wrote — a call object
// ({"name": ..., "arguments" | "parameters": {...}}) and a run of JSON values (several calls, `;`-separated in
// Llama 3.2's style). Pure; nothing here throws on model output: what does not parse is `undefined`.
import { isPlainObject } from '../guided/object-fields.js';

/** A chat template's tool-call syntax (tool-family.ts picks one from the template's text). */
export type ToolFamily = 'llama3_json' | 'hermes' | 'mistral';

/** One call the model made: `arguments` is the JSON text of an object, as OpenAI's responses carry it. */
export interface ParsedToolCall {
  name: string;
  arguments: string;
}

/** A family's call object as a call; undefined when it is not one (no name, arguments that are not an object). */
export function callFromJson(value: unknown): ParsedToolCall | undefined {
  if (!isPlainObject(value) || typeof value.name !== 'string' || value.name === '') return undefined;
  let args = value.arguments ?? value.parameters ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      return undefined;
    }
  }
  if (!isPlainObject(args)) return undefined;
  return { name: value.name, arguments: JSON.stringify(args) };
}

/** The index just past the JSON object or array that opens at `start`; -1 when it does not close in `text`. */
export function jsonValueEnd(text: string, start: number): number {
  const open = text[start];
  if (open !== '{' && open !== '[') return -1;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth += 1;
    else if (c === '}' || c === ']') {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The JSON objects and arrays `text` holds one after another, separated by whitespace (and `;` when
 * `semicolons`); undefined when anything else is there or one does not parse. */
export function jsonSequence(text: string, semicolons = false): unknown[] | undefined {
  const values: unknown[] = [];
  let i = 0;
  for (;;) {
    while (i < text.length && (/\s/.test(text[i]!) || (semicolons && text[i] === ';'))) i += 1;
    if (i >= text.length) break;
    const end = jsonValueEnd(text, i);
    if (end < 0) return undefined;
    try {
      values.push(JSON.parse(text.slice(i, end)));
    } catch {
      return undefined;
    }
    i = end;
  }
  return values.length > 0 ? values : undefined;
}

/** Every value as a call (an array contributes its elements); undefined unless all are calls. */
export function callsFromValues(values: readonly unknown[] | undefined, flattenArrays: boolean): ParsedToolCall[] | undefined {
  if (!values) return undefined;
  const calls: ParsedToolCall[] = [];
  for (const v of values) {
    for (const item of flattenArrays && Array.isArray(v) ? v : [v]) {
      const call = callFromJson(item);
      if (!call) return undefined;
      calls.push(call);
    }
  }
  return calls.length > 0 ? calls : undefined;
}
