// --medusa-choices: the candidates a Medusa step checks, as TensorRT-LLM's `medusa_choices` lists them — paths of
// ranks, [[0], [0, 0], [1], [0, 1]] — given as JSON text on the command line or as a YAML list of lists in a file.
// The option holds the JSON text (so it travels to the ranks as a flag unchanged); the engine checks the tree
// (medusa-tree.h: depth against the heads, parents first). --eagle-choices reads the same paths (its ranks the EAGLE
// draft's guesses after each parent) through the same kind. Pure.
import type { Checked, ValueKind } from './value-kinds.js';

const RULE = 'must be a list of paths of ranks, each a non-empty list of integers in [0, 10), e.g. [[0], [0, 0], [1]]';
const MAX_PATHS = 63;

function check(value: unknown): Checked<string> {
  const ok = Array.isArray(value) && value.length > 0 && value.length <= MAX_PATHS &&
    value.every((p) => Array.isArray(p) && p.length > 0 && p.every((r) => Number.isInteger(r) && r >= 0 && r < 10));
  return ok ? { ok: true, value: JSON.stringify(value) } : { ok: false, rule: `${RULE}; at most ${MAX_PATHS} paths` };
}

export const medusaChoicesKind: ValueKind<string> = {
  form: 'value',
  fromText: (text) => {
    try {
      return check(JSON.parse(text) as unknown);
    } catch {
      return check(undefined);
    }
  },
  fromFile: (value) => check(value),
  fileToOption: (value) => JSON.stringify(value),
};

/** The paths of the option's text (checked when it was read). */
export function medusaChoicesOf(text: string): number[][] {
  return JSON.parse(text) as number[][];
}
