// The most bytes of UTF-8 text one token can stand for, read from tokenizer.json once at load. A prompt of more
// than (most prompt tokens the model takes) × (that many) bytes must tokenize to more tokens than the model takes,
// so it is refused by its length alone, before any tokenizing (worker/frontend/prompt-bounds.ts). The bound is only
// claimed where it holds for every text: a tokenizer that can drop or collapse text — a strip, an accent or
// whitespace remover, a pre-tokenizer that removes what it splits on, characters outside the vocabulary dropped or
// fused into one unknown token, added tokens that swallow the spaces beside them — gets none, and its prompts are
// bounded only by tokenizing them (off the event loop, worker/tokenizer-pool.ts).
//
// Why the count holds: the pipeline is added-token split → normalizer → pre-tokenizer → BPE, and
//   bytes(text) ≤ shrink(normalizer) × bytes(normalized text)         (no normalizer stage deletes unboundedly)
//   bytes(normalized text) ≤ Σ over tokens of the bytes each covers     (nothing is dropped; BPE pieces partition it)
//                          ≤ tokens × (longest token's bytes)
// so tokens ≥ bytes(text) / (shrink × longest token). Special tokens a post-processor adds only raise the count.

type Json = Record<string, unknown>;

export type TokenByteBound =
  | { bytesPerToken: number; why?: undefined }
  | { bytesPerToken: undefined; why: string };   // why no bound holds for this tokenizer

// How much a normalizer can shrink text, as a factor on UTF-8 bytes, measured over every code point with Node's
// own String.prototype.normalize / toLowerCase (what @huggingface/tokenizers runs): NFKC maps U+107A5 (4 bytes) to
// one byte and composes 𝐮 + U+0308 + U+0304 (8 bytes) into ǖ (2 bytes); NFC composes at most 7 bytes into 2; no form
// deletes a code point. Lowercasing maps the Kelvin sign (3 bytes) to "k".
const UNICODE_FORM_SHRINK = 4;
const LOWERCASE_SHRINK = 3;

const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** A normalizer's shrink factor, or a reason it has none. */
function normalizerShrink(n: Json | null | undefined): number | string {
  if (n === null || n === undefined) return 1;
  switch (n.type) {
    case 'Prepend':
      return 1;
    case 'NFC': case 'NFD': case 'NFKC': case 'NFKD':
      return UNICODE_FORM_SHRINK;
    case 'Lowercase':
      return LOWERCASE_SHRINK;
    case 'Replace':
      return replaceShrink(n, 'normalizer');
    case 'Sequence': {
      let factor = 1;
      for (const step of (n.normalizers as Json[] | undefined) ?? []) {
        const f = normalizerShrink(step);
        if (typeof f === 'string') return f;
        factor *= f;
      }
      return factor;
    }
    default:
      // Strip, StripAccents, BertNormalizer (control characters) and Precompiled (SentencePiece's character map)
      // can delete text, so any length can become few tokens.
      return `its normalizer ${String(n.type)} can delete text`;
  }
}

/** A literal replacement shrinks each occurrence by at most pattern/content bytes; a regex or an empty content has no bound. */
function replaceShrink(r: Json, where: string): number | string {
  const pattern = (r.pattern as { String?: unknown } | undefined)?.String;
  const content = r.content;
  if (typeof pattern !== 'string' || typeof content !== 'string' || pattern === '') return `its ${where} Replace uses a regex`;
  if (content === '') return `its ${where} Replace deletes ${JSON.stringify(pattern)}`;
  return Math.max(1, utf8Length(pattern) / utf8Length(content));
}

/** Whether the pre-tokenizer keeps every character (a shrink factor for its Replace steps), or why not. */
function preTokenizerShrink(p: Json | null | undefined): number | string {
  if (p === null || p === undefined) return 1;
  switch (p.type) {
    case 'ByteLevel': case 'Metaspace': case 'Digits': case 'FixedLength':
      return 1;
    case 'Split': case 'Punctuation':
      return p.behavior === 'Removed' ? `its pre-tokenizer ${p.type} removes what it splits on` : 1;
    case 'Replace':
      return replaceShrink(p, 'pre-tokenizer');
    case 'Sequence': {
      let factor = 1;
      for (const step of (p.pretokenizers as Json[] | undefined) ?? []) {
        const f = preTokenizerShrink(step);
        if (typeof f === 'string') return f;
        factor *= f;
      }
      return factor;
    }
    default:
      // Whitespace, WhitespaceSplit, BertPreTokenizer drop the whitespace between words.
      return `its pre-tokenizer ${String(p.type)} drops whitespace`;
  }
}

function hasByteLevel(p: Json | null | undefined): boolean {
  if (!p) return false;
  if (p.type === 'ByteLevel') return true;
  return p.type === 'Sequence' && ((p.pretokenizers as Json[] | undefined) ?? []).some(hasByteLevel);
}

// GPT-2's byte-level alphabet: the character that stands for each byte (printable Latin-1 for itself, the rest 256+).
function byteLevelChars(): Set<string> {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const chars = new Set<string>();
  let n = 0;
  for (let b = 0; b < 256; b += 1) chars.add(String.fromCodePoint(printable(b) ? b : 256 + n++));
  return chars;
}

/** The most bytes of normalized text one model token covers, or why characters can be lost or fused. */
function modelTokenBytes(model: Json, byteLevel: boolean): number | string {
  if (model.type !== 'BPE') return `its model is ${String(model.type)}, not BPE`;
  const vocab = model.vocab as Record<string, number> | undefined;
  if (!vocab || typeof vocab !== 'object') return 'its BPE model has no vocabulary';
  const tokens = Object.keys(vocab);
  const unk = typeof model.unk_token === 'string' && vocab[model.unk_token] !== undefined;
  // A character outside the vocabulary becomes the unknown token (one character, 4 bytes at most) — unless unknowns
  // are fused into one token, or there is no unknown token and the character is dropped.
  const unknownsCovered = unk && model.fuse_unk !== true;
  let longest = 0;
  if (byteLevel) {
    // Each character of a byte-level token is one byte of the text (other characters cannot come out of the
    // pre-tokenizer; counting them at their UTF-8 length only overestimates).
    const alphabet = byteLevelChars();
    for (const token of tokens) {
      let bytes = 0;
      for (const ch of token) bytes += alphabet.has(ch) ? 1 : utf8Length(ch);
      longest = Math.max(longest, bytes);
    }
    if (![...alphabet].every((ch) => vocab[ch] !== undefined) && !unknownsCovered) {
      return 'its byte-level vocabulary lacks some bytes and has no unfused unknown token';
    }
    return unknownsCovered ? Math.max(longest, 1) : longest;
  }
  // A token's text is a piece of the normalized text (SentencePiece's "▁" counted at its own 3 bytes, byte-fallback
  // tokens "<0x41>" at 6: overestimates, which keep the bound sound).
  for (const token of tokens) longest = Math.max(longest, utf8Length(token));
  const byteFallback = model.byte_fallback === true
    && Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`).every((t) => vocab[t] !== undefined);
  if (byteFallback) return longest;
  if (unknownsCovered) return Math.max(longest, 4);
  return 'characters outside its vocabulary are dropped or fused (no byte fallback, no unfused unknown token)';
}

/**
 * The bound for a tokenizer.json (and its tokenizer_config.json, whose remove_space and
 * do_lowercase_and_remove_accent make @huggingface/tokenizers collapse and strip text).
 */
export function tokenByteBound(tokenizer: Json, config: Json = {}): TokenByteBound {
  const none = (why: string): TokenByteBound => ({ bytesPerToken: undefined, why });
  if (config.remove_space === true) return none('tokenizer_config.json sets remove_space (whitespace is collapsed)');
  if (config.do_lowercase_and_remove_accent === true) return none('tokenizer_config.json sets do_lowercase_and_remove_accent');
  const added = (tokenizer.added_tokens as Json[] | undefined) ?? [];
  const stripping = added.find((a) => a.lstrip === true || a.rstrip === true);
  if (stripping) return none(`its added token ${JSON.stringify(stripping.content)} strips the whitespace beside it`);
  const shrink = normalizerShrink(tokenizer.normalizer as Json | null | undefined);
  if (typeof shrink === 'string') return none(shrink);
  const pre = tokenizer.pre_tokenizer as Json | null | undefined;
  const preShrink = preTokenizerShrink(pre);
  if (typeof preShrink === 'string') return none(preShrink);
  const model = tokenizer.model as Json | undefined;
  if (!model) return none('tokenizer.json has no model');
  const perToken = modelTokenBytes(model, hasByteLevel(pre));
  if (typeof perToken === 'string') return none(perToken);
  // An added token matched in the raw text covers its content; one matched after normalization, at most shrink × it.
  const addedBytes = Math.max(0, ...added.map((a) => (typeof a.content === 'string' ? utf8Length(a.content) : 0)));
  const factor = shrink * preShrink;
  return { bytesPerToken: Math.ceil(factor * Math.max(perToken, addedBytes)) };
}
