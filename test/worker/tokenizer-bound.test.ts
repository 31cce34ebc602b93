// The bytes-per-token bound (worker/tokenizer-bound.ts): what it is for the checkpoints' tokenizers, that real
// tokenizations never beat it, and that every tokenizer stage able to drop or collapse text gets no bound, named.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Tokenizer } from '@huggingface/tokenizers';
import t from 'tap';

import { defaultModelDir } from '../../worker/common/package-root.js';
import { tokenByteBound } from '../../worker/tokenizer-bound.js';
import { loadTokenizer } from '../../worker/tokenizer.js';
import { fixtureDir } from '../helpers/fixtures.js';

const readJson = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>;

// Texts that make tokens long (runs of spaces, repeated words) or short (one byte per token: emoji, CJK, controls).
const TEXTS = [
  'What is machine learning?', ' '.repeat(300), 'copyright '.repeat(40), '\n\n\n\t\t  \r\n'.repeat(20),
  '日本語のテキスト、絵文字 😀🎉 and ﬁ ligatures, Ｆｕｌｌｗｉｄｔｈ, 𝐦𝐚𝐭𝐡', '\u0000\u0001\u007f\ufffd'.repeat(10),
  'a'.repeat(500), '<s></s><unk>'.repeat(10), 'e\u0301\u0323 \u1100\u1161\u11a8 \u212b \u2126',
];

for (const [name, dir] of [['tiny-gpt2', fixtureDir('tiny-gpt2')], ['tiny-llama', fixtureDir('tiny-llama')], ['brown-llama-17m', defaultModelDir()]] as const) {
  t.test(`${name}: a byte-level BPE gets its longest token's bytes, and no text beats it`, async (t) => {
    const json = readJson(dir, 'tokenizer.json');
    const vocab = (json.model as { vocab: Record<string, number> }).vocab;
    // In a byte-level vocabulary a token's characters are its bytes.
    const longest = Math.max(...Object.keys(vocab).map((k) => [...k].length));
    const bound = tokenByteBound(json, readJson(dir, 'tokenizer_config.json'));
    t.same(bound, { bytesPerToken: longest });
    t.same(loadTokenizer(dir).byteBound, bound, 'loadTokenizer reports it');
    const tokenizer = loadTokenizer(dir);
    for (const text of TEXTS) {
      const tokens = tokenizer.encode(text, { addSpecialTokens: false }).length;
      t.ok(tokens * longest >= Buffer.byteLength(text), `${JSON.stringify(text.slice(0, 20))}: ${tokens} tokens × ${longest} >= ${Buffer.byteLength(text)} bytes`);
    }
  });
}

// A SentencePiece-style BPE as Llama 2 and Mistral ship it: "▁" for spaces, byte fallback for the rest.
function sentencePiece(overrides: { model?: Record<string, unknown>; normalizer?: unknown; pre_tokenizer?: unknown; added_tokens?: unknown[] } = {}): Record<string, unknown> {
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b += 1) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  const pieces = ['▁', 't', 'h', 'e', '▁t', 'he', '▁the', '▁▁', '▁▁▁▁', 'a', 'aa', 'aaaa', 'aaaaaaaa'];
  for (const p of pieces) vocab[p] = Object.keys(vocab).length;
  return {
    added_tokens: overrides.added_tokens ?? [
      { id: 0, content: '<unk>', special: true, lstrip: false, rstrip: false, normalized: false },
      { id: 1, content: '<s>', special: true, lstrip: false, rstrip: false, normalized: false },
    ],
    normalizer: overrides.normalizer !== undefined ? overrides.normalizer : {
      type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }],
    },
    pre_tokenizer: overrides.pre_tokenizer ?? null,
    post_processor: null,
    decoder: null,
    model: {
      type: 'BPE', unk_token: '<unk>', fuse_unk: true, byte_fallback: true, vocab,
      merges: ['▁ t', 'h e', '▁t he', '▁ ▁', '▁▁ ▁▁', 'a a', 'aa aa', 'aaaa aaaa'],
      ...overrides.model,
    },
  };
}

t.test('a SentencePiece-style BPE: the longest piece at its own UTF-8 length, and no text beats it', async (t) => {
  const json = sentencePiece();
  // "▁▁▁▁" is 12 bytes of UTF-8 (it covers 4 spaces: counting it at 12 only overestimates); "<0xFF>" is 6.
  t.same(tokenByteBound(json), { bytesPerToken: 12 });
  const tokenizer = new Tokenizer(structuredClone(json), {});
  for (const text of [...TEXTS, 'the the the', '    '.repeat(50), 'aaaaaaaa'.repeat(20)]) {
    const tokens = tokenizer.encode(text, { add_special_tokens: false }).ids.length;
    t.ok(tokens * 12 >= Buffer.byteLength(text), `${JSON.stringify(text.slice(0, 20))}: ${tokens} tokens × 12 >= ${Buffer.byteLength(text)} bytes`);
  }
});

t.test('normalizers that shrink text scale the bound by how much they can', async (t) => {
  t.same(tokenByteBound(sentencePiece({ normalizer: { type: 'NFKC' } })), { bytesPerToken: 4 * 12 }, 'NFKC: 4 bytes can become 1');
  t.same(tokenByteBound(sentencePiece({ normalizer: { type: 'Lowercase' } })), { bytesPerToken: 3 * 12 }, 'Lowercase: the Kelvin sign becomes k');
  t.same(tokenByteBound(sentencePiece({ normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'Lowercase' }] } })),
    { bytesPerToken: 4 * 3 * 12 }, 'a sequence: the product');
  t.same(tokenByteBound(sentencePiece({ normalizer: { type: 'Replace', pattern: { String: 'abc' }, content: 'x' } })),
    { bytesPerToken: 3 * 12 }, 'a literal replacement by a shorter text: their ratio');
  t.same(tokenByteBound(sentencePiece({ normalizer: null, model: { unk_token: '<unk>', fuse_unk: false, byte_fallback: false } })),
    { bytesPerToken: 12 }, 'no byte fallback but an unfused unknown token: one character each');
  t.same(tokenByteBound(sentencePiece({
    added_tokens: [{ id: 0, content: '<|a very long added token|>', special: true, lstrip: false, rstrip: false, normalized: false }],
  })), { bytesPerToken: 27 }, 'an added token longer than every piece');
  const grown = sentencePiece();
  (grown.model as { vocab: Record<string, number> }).vocab['▁▁▁▁▁▁▁▁'] = 999;
  t.same(tokenByteBound(grown), { bytesPerToken: 24 }, 'read from the vocabulary');
});

t.test('a tokenizer that can drop or collapse text has no bound, and says why', async (t) => {
  const none = (json: Record<string, unknown>, config: Record<string, unknown> = {}) => tokenByteBound(json, config).why;
  t.match(none(sentencePiece({ normalizer: { type: 'Strip', strip_left: true, strip_right: true } })), /normalizer Strip can delete text/);
  t.match(none(sentencePiece({ normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'StripAccents' }] } })), /normalizer StripAccents/);
  t.match(none(sentencePiece({ normalizer: { type: 'BertNormalizer', clean_text: true } })), /BertNormalizer/);
  t.match(none(sentencePiece({ normalizer: { type: 'Precompiled', precompiled_charsmap: '' } })), /Precompiled/);
  t.match(none(sentencePiece({ normalizer: { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' } })), /Replace uses a regex/);
  t.match(none(sentencePiece({ normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '' } })), /Replace deletes " "/);
  t.match(none(sentencePiece({ pre_tokenizer: { type: 'Whitespace' } })), /pre-tokenizer Whitespace drops whitespace/);
  t.match(none(sentencePiece({ pre_tokenizer: { type: 'Split', pattern: { String: ' ' }, behavior: 'Removed' } })), /Split removes/);
  t.same(tokenByteBound(sentencePiece({ pre_tokenizer: { type: 'Split', pattern: { String: ' ' }, behavior: 'Isolated' } })), { bytesPerToken: 12 }, 'a split that keeps what it splits on');
  t.match(none(sentencePiece({ model: { byte_fallback: false, fuse_unk: true } })), /dropped or fused/);
  t.match(none(sentencePiece({ model: { byte_fallback: false, unk_token: null, fuse_unk: false } })), /dropped or fused/);
  t.match(none(sentencePiece({ model: { type: 'WordPiece' } })), /model is WordPiece, not BPE/);
  t.match(none(sentencePiece({ added_tokens: [{ id: 0, content: '<mask>', lstrip: true, rstrip: false }] })), /"<mask>" strips the whitespace/);
  t.match(none(sentencePiece(), { remove_space: true }), /remove_space/);
  const gaps = readJson(fixtureDir('tiny-gpt2'), 'tokenizer.json');
  delete (gaps.model as { vocab: Record<string, number> }).vocab['Ġ'];
  t.match(none(gaps), /byte-level vocabulary lacks some bytes/, 'a byte-level vocabulary without one of the 256 bytes drops it');
});
