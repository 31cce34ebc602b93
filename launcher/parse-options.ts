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
