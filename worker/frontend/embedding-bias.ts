// A request's additive bias over the vocabulary (the executor's embeddingBias: added to every logits row before the
// penalties, sampling and greedy choice) in the three forms clients send it: the seeds' embedding_bias_words +
// embedding_bias_weights (ensemble, tensorrt_llm_bls, preprocessing: each word tokenized alone, without special
// tokens, and each of its tokens gets the word's weight added, as Triton's preprocessing does), tensorrt_llm's
// embedding_bias tensor ([vocab_size] floats), and OpenAI's logit_bias ({"token id": bias in [-100, 100]}).
// A bias that changes nothing is no bias (the row may then still be sampled on the GPU). Pure; every rejection
// names the field and the value.
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import type { NamedValue } from './named-values.js';

export const BIAS_WORDS = 'embedding_bias_words';
export const BIAS_WEIGHTS = 'embedding_bias_weights';
export const BIAS_TENSOR = 'embedding_bias';
// OpenAI's documented range for a logit_bias value.
export const LOGIT_BIAS_LIMIT = 100;

export interface BiasWords {
  words: string[];    // aligned with weights; an empty word (or one without tokens) adds nothing
  weights: number[];
}

/** The words as given: each element of the tensor is one word (commas are part of it, as Triton's preprocessing
 * reads this input), or a single element holding a JSON list of words. */
function wordItems(data: unknown[], field: string): string[] {
  if (data.length === 1 && typeof data[0] === 'string' && data[0].trim().startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(data[0].trim());
    } catch {
      throw badRequest(`${field} looks like a JSON list but does not parse: ${JSON.stringify(data[0])}`, field);
    }
    if (!Array.isArray(parsed) || parsed.some((w) => typeof w !== 'string')) {
      throw badRequest(`${field} must be a JSON list of strings, got ${describeValue(parsed)}`, field);
    }
    return parsed as string[];
  }
  const bad = data.findIndex((w) => typeof w !== 'string');
  if (bad >= 0) throw badRequest(`${field}[${bad}] must be a string, got ${describeValue(data[bad])}`, field);
  return data as string[];
}

function numbers(data: unknown[] | Float32Array, field: string): number[] {
  const values = Array.from(data as ArrayLike<unknown>);
  const bad = values.findIndex((w) => typeof w !== 'number' || !Number.isFinite(w));
  if (bad >= 0) throw badRequest(`${field}[${bad}] must be a finite number, got ${describeValue(values[bad])}`, field);
  return values as number[];
}

/** embedding_bias_words + embedding_bias_weights (one weight per word; `names`: the two inputs' names, which the
 * preprocessing model spells in capitals); undefined when neither is given. */
export function readBiasWords(words: NamedValue | undefined, weights: NamedValue | undefined,
  names = { words: BIAS_WORDS, weights: BIAS_WEIGHTS }): BiasWords | undefined {
  if (words === undefined && weights === undefined) return undefined;
  if (words === undefined) throw badRequest(`${names.weights} needs ${names.words} (the words the weights are for)`, names.words);
  if (weights === undefined) throw badRequest(`${names.words} needs ${names.weights} (one weight per word)`, names.weights);
  const list = wordItems(Array.from(words.data as ArrayLike<unknown>), names.words);
  const w = numbers(weights.data, names.weights);
  if (w.length !== list.length) {
    throw badRequest(`${names.weights} has ${w.length} value(s) but ${names.words} has ${list.length} word(s); give one weight per word`, names.weights);
  }
  return list.length > 0 ? { words: list, weights: w } : undefined;
}

/** The non-empty words to tokenize. */
export function biasWordList(bias: BiasWords | undefined): string[] {
  return bias?.words.filter((w) => w !== '') ?? [];
}

/** The bias the words make once tokenized (`encoded`: each word's ids, without special tokens); undefined when no
 * token gets a non-zero bias. */
export function biasFromWords(encoded: ReadonlyMap<string, number[]>, bias: BiasWords | undefined, vocabSize: number): Float32Array | undefined {
  if (bias === undefined) return undefined;
  const out = new Float32Array(vocabSize);
  bias.words.forEach((word, i) => {
    for (const id of encoded.get(word) ?? []) out[id]! += bias.weights[i]!;
  });
  return out.some((v) => v !== 0) ? out : undefined;
}

/** tensorrt_llm's embedding_bias for row i of a batch: [vocab] or [1, vocab] for every row, [batch, vocab] per row. */
export function readBiasTensor(value: NamedValue | undefined, vocabSize: number, i: number, batch: number): Float32Array | undefined {
  if (value === undefined || value.data.length === 0) return undefined;
  const perRow = value.shape.length === 2 && value.shape[0] === batch && batch > 1;
  const width = value.shape[value.shape.length - 1]!;
  if (value.shape.length > 2 || (value.shape.length === 2 && value.shape[0] !== 1 && !perRow) || width !== vocabSize) {
    const rows = batch > 1 ? ` or [${batch}, ${vocabSize}] (one row per request)` : '';
    throw badRequest(`${BIAS_TENSOR} must have shape [${vocabSize}] (vocab_size) or [1, ${vocabSize}]${rows}, got [${value.shape.join(', ')}]`, BIAS_TENSOR);
  }
  const all = value.data;
  const row = perRow ? all.slice(i * width, (i + 1) * width) : all;
  const out = Float32Array.from(numbers(row, BIAS_TENSOR));
  return out.some((v) => v !== 0) ? out : undefined;
}

/** OpenAI's logit_bias: token ids (as decimal strings) to biases in [-100, 100], checked against the vocabulary
 * later (logitBiasVector: the model, and so its size, is known once the request's "model" is looked up). */
export function readLogitBias(value: unknown): ReadonlyMap<number, number> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest(`logit_bias must be an object of token ids to biases, got ${describeValue(value)}`, 'logit_bias');
  }
  const out = new Map<number, number>();
  for (const [key, bias] of Object.entries(value as Record<string, unknown>)) {
    const id = /^\d+$/.test(key) ? Number(key) : Number.NaN;
    if (!Number.isSafeInteger(id)) throw badRequest(`logit_bias key ${JSON.stringify(key)} must be a token id (a non-negative integer)`, 'logit_bias');
    if (typeof bias !== 'number' || !Number.isFinite(bias) || Math.abs(bias) > LOGIT_BIAS_LIMIT) {
      throw badRequest(`logit_bias[${JSON.stringify(key)}] must be a number in [-${LOGIT_BIAS_LIMIT}, ${LOGIT_BIAS_LIMIT}], got ${describeValue(bias)}`, 'logit_bias');
    }
    if (bias !== 0) out.set(id, bias);
  }
  return out.size > 0 ? out : undefined;
}

/** logit_bias as the executor's [vocab_size] embeddingBias. */
export function logitBiasVector(bias: ReadonlyMap<number, number> | undefined, vocabSize: number): Float32Array | undefined {
  if (bias === undefined) return undefined;
  const out = new Float32Array(vocabSize);
  for (const [id, value] of bias) {
    if (id >= vocabSize) throw badRequest(`logit_bias key "${id}" must be a token id in [0, ${vocabSize}) (vocab_size)`, 'logit_bias');
    out[id] = value;
  }
  return out;
}
