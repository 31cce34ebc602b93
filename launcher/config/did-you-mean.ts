// "did you mean ...?" for unknown configuration keys: the closest known key by edit distance (pure).

/** Edits (insert, delete, substitute) that turn a into b. */
export function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitute = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitute));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The nearest candidate, when it is near enough to be a typo (a third of the word, at least 2 edits) or the word
 * and a key extend one another (`max_batch` for `max_batch_size`, `enable_reuse_blocks` for `enable_reuse`).
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  const limit = Math.max(2, Math.floor(word.length / 3));
  const extended = candidates.filter((name) => Math.min(lower.length, name.length) >= 3 && (name.startsWith(lower) || lower.startsWith(name)));
  if (extended.length === 1) return extended[0];
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = levenshtein(lower, name);
    if (distance <= limit && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}
