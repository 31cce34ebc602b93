// Option parsers for commander that reject bad values with the option's name and the value received.
import { InvalidArgumentError } from 'commander';

export function parseIntOption(name: string, min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`${name} must be an integer >= ${min}, got "${value}"`);
    }
    return n;
  };
}

export function parseNumberOption(name: string, min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min) {
      throw new InvalidArgumentError(`${name} must be a number >= ${min}, got "${value}"`);
    }
    return n;
  };
}

export function parseFractionOption(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 1) {
      throw new InvalidArgumentError(`${name} must be a number in (0, 1], got "${value}"`);
    }
    return n;
  };
}

export function parsePortOption(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n > 65535) {
      throw new InvalidArgumentError(`${name} must be a port number in [0, 65535], got "${value}"`);
    }
    return n;
  };
}

export function parseChoiceOption<T extends string>(name: string, choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`${name} must be one of ${choices.join(', ')}, got "${value}"`);
    }
    return value as T;
  };
}

// Switches with an optional value: `--x`, `--x true`, `--x false`, and the same words (or 1/0) from the env.
const TRUE_WORDS = ['true', '1', 'yes', 'on'];
const FALSE_WORDS = ['false', '0', 'no', 'off'];

export function parseBoolOption(name: string): (value: string) => boolean {
  return (value) => {
    const v = value.trim().toLowerCase();
    if (TRUE_WORDS.includes(v)) return true;
    if (FALSE_WORDS.includes(v)) return false;
    throw new InvalidArgumentError(`${name} must be true or false, got "${value}"`);
  };
}
