// Checks for values read from a configuration file (pure). YAML already gives types, so unlike flags nothing is
// converted: a quoted "8" where an integer belongs is an error, said in the same words as the flag's error.
export type CheckResult = { ok: true; value: unknown } | { ok: false; rule: string };
export type Check = (value: unknown) => CheckResult;

const pass = (value: unknown): CheckResult => ({ ok: true, value });
const fail = (rule: string): CheckResult => ({ ok: false, rule });

export function intCheck(min: number): Check {
  return (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= min ? pass(v) : fail(`must be an integer >= ${min}`));
}

export const portCheck: Check = (v) =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 65535 ? pass(v) : fail('must be a port number in [0, 65535]');

export const fractionCheck: Check = (v) =>
  typeof v === 'number' && v > 0 && v <= 1 ? pass(v) : fail('must be a number in (0, 1]');

export const boolCheck: Check = (v) => (typeof v === 'boolean' ? pass(v) : fail('must be true or false'));

export const textCheck: Check = (v) => (typeof v === 'string' && v.trim() !== '' ? pass(v) : fail('must be a non-empty string'));

export function choiceCheck(choices: readonly string[]): Check {
  return (v) => (typeof v === 'string' && choices.includes(v) ? pass(v) : fail(`must be one of ${choices.join(', ')}`));
}

export const deviceIdsCheck: Check = (v) =>
  Array.isArray(v) && v.length > 0 && v.every((id) => typeof id === 'number' && Number.isSafeInteger(id) && id >= 0)
    ? pass(Object.freeze([...v]))
    : fail('must be a non-empty list of integers >= 0');

export const participantIdsCheck: Check = (v) =>
  Array.isArray(v) && v.length > 0 && v.every((id) => typeof id === 'number' && Number.isSafeInteger(id) && id >= 1)
    ? pass(Object.freeze([...v]))
    : fail('must be a non-empty list of MPI ranks >= 1 (rank 0 is the orchestrator)');

/** A received value as an error message quotes it: strings quoted, everything else as JSON. */
export function showValue(value: unknown): string {
  if (typeof value === 'string') return `"${value}"`;
  if (value === undefined) return 'nothing';
  return JSON.stringify(value) ?? String(value);
}
