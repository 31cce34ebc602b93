// How deeply a JSON text nests, checked on the bytes before JSON.parse. V8's JSON.parse does not recurse, so it
// parses 10,000 nested arrays fine; what overflowed the stack (a 500 with "Maximum call stack size exceeded") was a
// later recursive walk — Array.prototype.flat(Infinity) over a tensor's data, JSON.stringify of a value echoed in an
// error. No request of these APIs nests more than a few levels (a batch of token-id lists inside a tensor inside
// "inputs": 5), so a limit far above that and far below any stack refuses the hostile body before anything walks it.
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/** Whether arrays and objects nest deeper than `limit` in `text` (UTF-8 JSON, valid or not); brackets inside
 * strings do not count. Linear in the length; bodies with few brackets are settled by a native count alone. */
export function nestsDeeperThan(text: Uint8Array, limit: number): boolean {
  if (countUpTo(text, OPEN_ARRAY, limit + 1) + countUpTo(text, OPEN_OBJECT, limit + 1) <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i]!;
    if (inString) {
      if (c === BACKSLASH) i += 1;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      depth += 1;
      if (depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth -= 1;
    }
  }
  return false;
}

/** Occurrences of `byte` in `text`, counting stops past `max` (indexOf is a native scan). */
function countUpTo(text: Uint8Array, byte: number, max: number): number {
  let n = 0;
  for (let i = text.indexOf(byte); i >= 0 && n < max; i = text.indexOf(byte, i + 1)) n += 1;
  return n;
}
