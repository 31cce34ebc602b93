// Stop and bad words in the forms users send them: the seeds' "" (none), a comma list ("a,b"), a JSON list given
// as a string ('["a","b"]') or a real JSON array; and Triton's token-level [2, N] tensor (flat ids, end offsets).
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';

/** Parses the text forms into words; empty items are dropped and spaces are kept (" world" is its own word). */
export function parseWordList(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) {
    const bad = value.findIndex((w) => typeof w !== 'string');
    if (bad >= 0) throw badRequest(`${field}[${bad}] must be a string, got ${describeValue(value[bad])}`, field);
    return (value as string[]).filter((w) => w !== '');
  }
  if (typeof value !== 'string') {
    throw badRequest(`${field} must be a string, a comma-separated list or a JSON list of strings, got ${describeValue(value)}`, field);
  }
  const trimmed = value.trim();
  if (trimmed.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      throw badRequest(`${field} looks like a JSON list but does not parse: ${JSON.stringify(value)}`, field);
    }
    return parseWordList(parsed, field);
  }
  return value.split(',').filter((w) => w !== '');
}

/**
 * Triton's word-list tensor for one request, shape [2, N]: row 0 holds the words' ids back to back, row 1 the end
 * offset of each word, padded with -1 (an all -1 or empty tensor means no words).
 */
export function parseWordTensor(data: unknown[], shape: number[], field: string): number[][] {
  if (shape.length !== 2 || shape[0] !== 2) {
    throw badRequest(`${field} must have shape [2, N] per request (ids, end offsets), got [${shape.join(', ')}]`, field);
  }
  const n = shape[1]!;
  const ids = data.slice(0, n) as number[];
  const offsets = (data.slice(n) as number[]).filter((o) => o >= 0);
  const words: number[][] = [];
  let start = 0;
  for (const end of offsets) {
    if (!Number.isSafeInteger(end) || end <= start || end > n) {
      throw badRequest(`${field}: offsets must increase within [1, ${n}], got ${describeValue(end)} after ${start}`, field);
    }
    words.push(ids.slice(start, end));
    start = end;
  }
  return words;
}

/** The inverse of parseWordTensor: words as Triton's [2, N] tensor (row-major data), padded with -1. */
export function toWordTensor(words: readonly number[][]): { shape: number[]; data: number[] } {
  const ids = words.flat();
  const n = Math.max(ids.length, 1);
  const offsets: number[] = [];
  let end = 0;
  for (const w of words) offsets.push((end += w.length));
  const row0 = [...ids, ...new Array<number>(n - ids.length).fill(0)];
  const row1 = [...offsets, ...new Array<number>(n - offsets.length).fill(-1)];
  return { shape: [2, n], data: [...row0, ...row1] };
}
