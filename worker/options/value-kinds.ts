// The kinds of value an option takes. A kind says its rule once — "must be an integer >= 1" — and every source of a
// value says it in those words: a flag or env variable (text, converted), a configuration file (typed by YAML already,
// so checked but never converted: a quoted "8" is not 8). A kind also writes a value back as a flag's text, for the
// ranks of a cluster and for job scripts. Pure: no commander, no I/O; the launcher turns a failed check into its
// own error (parse-options.ts, config/parse-config-file.ts).

export type Checked<T = unknown> = { ok: true; value: T } | { ok: false; rule: string };

export interface ValueKind<T = unknown> {
  /** How a flag takes it: `--x <v>`; a switch `--x` (on when given); a toggle `--x [bool]` ("--x false" turns it off). */
  readonly form: 'value' | 'switch' | 'toggle';
  /** A flag's or an env variable's text. */
  fromText(text: string): Checked<T>;
  /** A configuration file's value, as YAML typed it. */
  fromFile(value: unknown): Checked;
  /** A checked file value as the option holds it, when the two differ (a device list is "0,1" on the command line). */
  fileToOption?(value: unknown): T;
  /** A flag that takes several values (`--x a b`, or `--x a --x b`): the values so far and the next ones gathered,
   * in order, or why they cannot be (a name given twice). Its placeholder ends in "...". */
  append?(previous: T, next: T): Checked<T>;
}

const pass = <T>(value: T): Checked<T> => ({ ok: true, value });
const fail = (rule: string): Checked<never> => ({ ok: false, rule });

/** `max`: for a value the engine holds in 32 bits (a larger one would wrap), so it is refused here, named. */
export function intKind(min: number, max = Number.MAX_SAFE_INTEGER): ValueKind<number> {
  const rule = max === Number.MAX_SAFE_INTEGER ? `must be an integer >= ${min}` : `must be an integer in [${min}, ${max}]`;
  const ok = (n: number) => Number.isSafeInteger(n) && n >= min && n <= max;
  return {
    form: 'value',
    fromText: (text) => {
      const n = Number(text);
      return /^-?\d+$/.test(text.trim()) && ok(n) ? pass(n) : fail(rule);
    },
    fromFile: (v) => (typeof v === 'number' && ok(v) ? pass(v) : fail(rule)),
  };
}

/** The largest value of an engine int32 field. */
export const INT32_MAX = 2 ** 31 - 1;

export function numberKind(min: number): ValueKind<number> {
  const rule = `must be a number >= ${min}`;
  return {
    form: 'value',
    fromText: (text) => {
      const n = Number(text);
      return text.trim() !== '' && Number.isFinite(n) && n >= min ? pass(n) : fail(rule);
    },
    fromFile: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= min ? pass(v) : fail(rule)),
  };
}

const FRACTION_RULE = 'must be a number in (0, 1]';
export const fractionKind: ValueKind<number> = {
  form: 'value',
  fromText: (text) => {
    const n = Number(text);
    return text.trim() !== '' && Number.isFinite(n) && n > 0 && n <= 1 ? pass(n) : fail(FRACTION_RULE);
  },
  fromFile: (v) => (typeof v === 'number' && v > 0 && v <= 1 ? pass(v) : fail(FRACTION_RULE)),
};

const PORT_RULE = 'must be a port number in [0, 65535]';
export const portKind: ValueKind<number> = {
  form: 'value',
  fromText: (text) => {
    const n = Number(text);
    return /^\d+$/.test(text.trim()) && n <= 65535 ? pass(n) : fail(PORT_RULE);
  },
  fromFile: (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 65535 ? pass(v) : fail(PORT_RULE)),
};

export function choiceKind<T extends string>(choices: readonly T[]): ValueKind<T> {
  const rule = `must be one of ${choices.join(', ')}`;
  const ok = (v: unknown): v is T => typeof v === 'string' && (choices as readonly string[]).includes(v);
  return { form: 'value', fromText: (text) => (ok(text) ? pass(text) : fail(rule)), fromFile: (v) => (ok(v) ? pass(v) : fail(rule)) };
}

// Switches with an optional value: `--x`, `--x true`, `--x false`, and the same words (or 1/0) from the env.
const TRUE_WORDS = ['true', '1', 'yes', 'on'];
const FALSE_WORDS = ['false', '0', 'no', 'off'];
const BOOL_RULE = 'must be true or false';

function boolFromText(text: string): Checked<boolean> {
  const v = text.trim().toLowerCase();
  if (TRUE_WORDS.includes(v)) return pass(true);
  if (FALSE_WORDS.includes(v)) return pass(false);
  return fail(BOOL_RULE);
}
const boolFromFile = (v: unknown): Checked => (typeof v === 'boolean' ? pass(v) : fail(BOOL_RULE));

/** A switch a file may have turned on must be able to turn it off again, and TRTLLM_X=false must mean false. */
export const toggleKind: ValueKind<boolean> = { form: 'toggle', fromText: boolFromText, fromFile: boolFromFile };

/** A plain `--x`: commander sets it when given (from the env too, whatever the value: see toggleKind for off-able ones). */
export const switchKind: ValueKind<boolean> = { form: 'switch', fromText: boolFromText, fromFile: boolFromFile };

// Flags and env take any text as given (the shell already did the quoting); a file's value must be a real string.
const TEXT_RULE = 'must be a non-empty string';
export const textKind: ValueKind<string> = {
  form: 'value',
  fromText: (t) => pass(t),
  fromFile: (v) => (typeof v === 'string' && v.trim() !== '' ? pass(v) : fail(TEXT_RULE)),
};

const isIdList = (v: unknown, min: number): v is number[] =>
  Array.isArray(v) && v.length > 0 && v.every((id) => typeof id === 'number' && Number.isSafeInteger(id) && id >= min);

/**
 * GPU ids. A file gives a list ([0, 1]); the flag gives text, kept as text because its shape depends on the mode
 * ("0,1" by local rank, or --multi-model's per-model "0,1;2,3"), and checked where the mode is known (device-ids.ts).
 */
export const deviceIdsKind: ValueKind<string> = {
  form: 'value',
  fromText: (t) => pass(t),
  fromFile: (v) => (isIdList(v, 0) ? pass(Object.freeze([...v])) : fail('must be a non-empty list of integers >= 0')),
  fileToOption: (v) => (v as readonly number[]).join(','),
};

/** --pp-layers: 'balanced' or one layer count per stage ("4,2"; a file may give the list [4, 2]). Whether the counts
 * fit the model and --pp is the engine's check (parallel/pp-partition.h), made before launch (model-preflight.ts). */
const PP_LAYERS_RULE = "must be 'balanced' or a comma-separated list of layer counts >= 1, one per pipeline stage";
export const ppLayersKind: ValueKind<string> = {
  form: 'value',
  fromText: (t) => (t === 'balanced' || /^\d+(,\d+)*$/.test(t) ? pass(t) : fail(PP_LAYERS_RULE)),
  fromFile: (v) => (v === 'balanced' || isIdList(v, 1) ? pass(v) : fail(PP_LAYERS_RULE)),
  fileToOption: (v) => (Array.isArray(v) ? v.join(',') : String(v)),
};

/** --multi-model --no-spawn: the job ranks that run a model (a file key only). */
export const participantIdsKind: ValueKind<readonly number[]> = {
  form: 'value',
  fromText: () => fail('must be given in a model file'),
  fromFile: (v) => (isIdList(v, 1) ? pass(Object.freeze([...v])) : fail('must be a non-empty list of MPI ranks >= 1 (rank 0 is the orchestrator)')),
};
