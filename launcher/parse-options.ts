// Option parsers for commander that reject bad values with the option's name and the value received. The rules are
// the value kinds' (worker/options/value-kinds.ts), so a flag, its env variable and a configuration file's key are
// refused in the same words.
import { InvalidArgumentError } from 'commander';

import {
  choiceKind, fractionKind, intKind, numberKind, portKind, toggleKind, type ValueKind,
} from '../worker/options/value-kinds.js';

/** A commander argParser for `name` that takes a value of `kind`: `--x must be an integer >= 1, got "abc"`. */
export function flagParser<T>(name: string, kind: ValueKind<T>): (value: string) => T {
  return (value) => {
    const checked = kind.fromText(value);
    if (!checked.ok) throw new InvalidArgumentError(`${name} ${checked.rule}, got "${value}"`);
    return checked.value;
  };
}

/** flagParser for a kind that gathers several values (ValueKind.append): each value is checked alone, then with those
 * before it (commander hands the option's value so far as `previous`). */
export function gatheringFlagParser<T>(name: string, kind: ValueKind<T>): (value: string, previous: T | undefined) => T {
  const one = flagParser(name, kind);
  return (value, previous) => {
    const next = one(value);
    if (previous === undefined || !kind.append) return next;
    const gathered = kind.append(previous, next);
    if (!gathered.ok) throw new InvalidArgumentError(`${name} ${gathered.rule}, got "${value}"`);
    return gathered.value;
  };
}

export const parseIntOption = (name: string, min: number) => flagParser(name, intKind(min));
export const parseNumberOption = (name: string, min: number) => flagParser(name, numberKind(min));
export const parseFractionOption = (name: string) => flagParser(name, fractionKind);
export const parsePortOption = (name: string) => flagParser(name, portKind);
export const parseChoiceOption = <T extends string>(name: string, choices: readonly T[]) => flagParser(name, choiceKind(choices));
/** Switches with an optional value: `--x`, `--x true`, `--x false`, and the same words (or 1/0) from the env. */
export const parseBoolOption = (name: string) => flagParser(name, toggleKind);
