// The request bias's three client forms read and turned into the executor's [vocab_size] embeddingBias: words with
// weights (the seeds' ensemble / BLS inputs), tensorrt_llm's tensor, OpenAI's logit_bias — and their bad inputs.
import t from 'tap';

import {
  biasFromWords, biasWordList, logitBiasVector, readBiasTensor, readBiasWords, readLogitBias,
} from '../../../worker/frontend/embedding-bias.js';
import { fromJsonField, type NamedValue } from '../../../worker/frontend/named-values.js';

const field = (name: string, value: unknown): NamedValue => fromJsonField(name, value);
const status = (fn: () => unknown): number | undefined => {
  try {
    fn();
    return undefined;
  } catch (error) {
    return (error as { status?: number }).status;
  }
};

t.test('embedding_bias_words + embedding_bias_weights', async (t) => {
  t.same(readBiasWords(field('w', ['hello', ' world']), field('x', [2, -1.5])), { words: ['hello', ' world'], weights: [2, -1.5] }, 'a list of words');
  t.same(readBiasWords(field('w', 'a,b'), field('x', [1])), { words: ['a,b'], weights: [1] }, 'a comma is part of the word');
  t.same(readBiasWords(field('w', '["a, b"]'), field('x', [3])), { words: ['a, b'], weights: [3] }, 'a JSON list in one string');
  t.same(readBiasWords({ shape: [2], data: ['p', 'q'] }, { shape: [2], data: Float32Array.from([0.5, 4]) }), { words: ['p', 'q'], weights: [0.5, 4] }, 'FP32 weights as a typed array');
  t.equal(readBiasWords(undefined, undefined), undefined, 'neither: no bias');
  t.equal(readBiasWords({ shape: [0], data: [] }, { shape: [0], data: [] }), undefined, 'no words: no bias');
  t.throws(() => readBiasWords(field('w', '["a", 1]'), field('x', [1, 2])), /embedding_bias_words must be a JSON list of strings/);
  t.throws(() => readBiasWords(field('w', ['a', 'b']), field('x', [1])), /embedding_bias_weights has 1 value\(s\) but embedding_bias_words has 2 word\(s\)/);
  t.throws(() => readBiasWords(field('w', ['a']), undefined), /embedding_bias_words needs embedding_bias_weights/);
  t.throws(() => readBiasWords(undefined, field('x', [1])), /embedding_bias_weights needs embedding_bias_words/);
  t.throws(() => readBiasWords(field('w', ['a', 5]), field('x', [1, 2])), /embedding_bias_words\[1\] must be a string, got 5/);
  t.throws(() => readBiasWords(field('w', ['a']), field('x', ['big'])), /embedding_bias_weights\[0\] must be a finite number, got "big"/);
  t.throws(() => readBiasWords(field('w', '["a"'), field('x', [1])), /looks like a JSON list but does not parse/);
  t.throws(() => readBiasWords(field('W', ['a']), field('X', [1, 2]), { words: 'EMBEDDING_BIAS_WORDS', weights: 'EMBEDDING_BIAS_WEIGHTS' }),
    /EMBEDDING_BIAS_WEIGHTS has 2 value\(s\) but EMBEDDING_BIAS_WORDS has 1/, 'the preprocessing model\'s names');
  t.throws(() => readBiasWords(field('w', 7), field('x', [1])), /embedding_bias_words\[0\] must be a string, got 7/);
  for (const bad of [() => readBiasWords(field('w', ['a', 'b']), field('x', [1])), () => readBiasWords(field('w', 7), field('x', [1]))]) {
    t.equal(status(bad), 400);
  }
  t.same(biasWordList({ words: ['', 'a'], weights: [1, 2] }), ['a'], 'empty words are not tokenized');
});

t.test('words to a bias: every token of a word gets its weight, repeats add up', async (t) => {
  const encoded = new Map([['ab', [3, 4]], ['b', [4]], ['aa', [1, 1]], ['none', []]]);
  const bias = biasFromWords(encoded, { words: ['ab', 'b', 'aa', 'none', ''], weights: [1, 2, 0.5, 9, 9] }, 8)!;
  t.same(Array.from(bias), [0, 1, 0, 1, 3, 0, 0, 0]);
  t.equal(biasFromWords(encoded, { words: ['none'], weights: [5] }, 8), undefined, 'words without tokens: no bias');
  t.equal(biasFromWords(encoded, { words: ['b'], weights: [0] }, 8), undefined, 'zero weights: no bias');
  t.equal(biasFromWords(encoded, undefined, 8), undefined);
});

t.test("tensorrt_llm's embedding_bias tensor", async (t) => {
  const v = [0, 0, 5, 0];
  t.same(Array.from(readBiasTensor({ shape: [4], data: v }, 4, 0, 1)!), v, '[vocab]');
  t.same(Array.from(readBiasTensor({ shape: [1, 4], data: Float32Array.from(v) }, 4, 1, 2)!), v, '[1, vocab] for every row');
  const rows = { shape: [2, 4], data: [1, 0, 0, 0, 0, 0, 0, 2] };
  t.same(Array.from(readBiasTensor(rows, 4, 0, 2)!), [1, 0, 0, 0], '[batch, vocab]: row 0');
  t.same(Array.from(readBiasTensor(rows, 4, 1, 2)!), [0, 0, 0, 2], '[batch, vocab]: row 1');
  t.equal(readBiasTensor({ shape: [4], data: [0, 0, 0, 0] }, 4, 0, 1), undefined, 'all zero: no bias');
  t.equal(readBiasTensor({ shape: [0], data: [] }, 4, 0, 1), undefined, 'empty: no bias');
  t.equal(readBiasTensor(undefined, 4, 0, 1), undefined);
  t.throws(() => readBiasTensor({ shape: [3], data: [1, 2, 3] }, 4, 0, 1), /embedding_bias must have shape \[4\] \(vocab_size\) or \[1, 4\], got \[3\]/);
  t.throws(() => readBiasTensor({ shape: [3, 4], data: new Array(12).fill(0) }, 4, 0, 2), /or \[2, 4\] \(one row per request\), got \[3, 4\]/, 'rows that are not the batch');
  t.throws(() => readBiasTensor({ shape: [4], data: [0, 'x', 0, 0] }, 4, 0, 1), /embedding_bias\[1\] must be a finite number, got "x"/);
});

t.test("OpenAI's logit_bias", async (t) => {
  const bias = readLogitBias({ 5: 100, 2: -100, 7: 0.5, 3: 0 })!;
  t.same([...bias.entries()], [[2, -100], [5, 100], [7, 0.5]], 'zeros dropped');
  t.same(Array.from(logitBiasVector(bias, 8)!), [0, 0, -100, 0, 0, 100, 0, 0.5]);
  t.equal(readLogitBias({}), undefined, 'empty: no bias');
  t.equal(readLogitBias(null), undefined);
  t.equal(readLogitBias({ 4: 0 }), undefined, 'only zeros: no bias');
  t.equal(logitBiasVector(undefined, 8), undefined);
  t.throws(() => readLogitBias({ x: 1 }), /logit_bias key "x" must be a token id/);
  t.throws(() => readLogitBias({ '-1': 1 }), /logit_bias key "-1" must be a token id/);
  t.throws(() => readLogitBias({ 1: 101 }), /logit_bias\["1"\] must be a number in \[-100, 100\], got 101/);
  t.throws(() => readLogitBias({ 1: '5' }), /logit_bias\["1"\] must be a number in \[-100, 100\], got "5"/);
  t.throws(() => readLogitBias([1]), /logit_bias must be an object of token ids to biases/);
  t.throws(() => logitBiasVector(readLogitBias({ 8: 1 }), 8), /logit_bias key "8" must be a token id in \[0, 8\) \(vocab_size\)/);
  t.equal(status(() => readLogitBias({ 1: 500 })), 400);
});
