// A tool's parameters schema placed inside a bigger schema (the forced call's payload): its `$ref`s were written
// against its own root, so they are rewritten to where it now sits, and its `$defs` / `definitions` move to the new
// root under a per-tool prefix (a JSON Schema's definitions must be reachable from the root, and two tools may both
// define "Item"). Pydantic-made schemas (`$defs` + `$ref: "#/$defs/X"`) are the common case. Pure; the input is not
// modified.
import { isPlainObject } from '../guided/object-fields.js';

const DEF_KEYS = ['$defs', 'definitions'];

/** A JSON Pointer's reference token for `key`. */
function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * `schema` as it must read at JSON Pointer `at` of a new root whose `$defs` will receive `defs` (filled here, keys
 * prefixed with `prefix`).
 */
export function embedSchema(schema: Record<string, unknown>, at: string, prefix: string, defs: Record<string, unknown>): Record<string, unknown> {
  const renamed = new Map<string, string>();   // "#/$defs/X" and "#/definitions/X" → "#/$defs/<prefix>X"
  for (const key of DEF_KEYS) {
    const d = schema[key];
    if (!isPlainObject(d)) continue;
    for (const name of Object.keys(d)) renamed.set(`#/${key}/${pointerToken(name)}`, `#/$defs/${pointerToken(prefix + name)}`);
  }
  const rewriteRef = (ref: string): string => {
    if (!ref.startsWith('#')) return ref;   // an absolute or relative URI: not ours to move
    for (const [from, to] of renamed) {
      if (ref === from || ref.startsWith(`${from}/`)) return to + ref.slice(from.length);
    }
    return `#${at}${ref.slice(1)}`;
  };
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk);
    if (!isPlainObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = k === '$ref' && typeof v === 'string' ? rewriteRef(v) : walk(v);
    return out;
  };
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === '$schema') continue;   // the dialect is the root's to say
    if (DEF_KEYS.includes(k) && isPlainObject(v)) {
      for (const [name, def] of Object.entries(v)) defs[prefix + name] = walk(def);
    } else {
      body[k] = walk(v);
    }
  }
  return body;
}
