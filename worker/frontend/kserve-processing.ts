// preprocessing (text → ids) and postprocessing (ids → text), the tokenizer halves of Triton's ensemble, with
// Triton's tensor names, served from our tokenizer pool (prompt-bounds.ts: bounded, off the event loop).
import { describeValue } from '../common/errors.js';
import { biasFromWords, biasWordList, readBiasWords } from './embedding-bias.js';
import { checkBatch } from './fan-out.js';
import { badRequest } from './http-errors.js';
import { immediateRun, type ModelRun, type OutputTensor, type RunOptions } from './model-run.js';
import { elementAt, type NamedValues, optInt } from './named-values.js';
import { detokenize, tokenize } from './prompt-bounds.js';
import type { ServingContext } from './serving-context.js';
import { wordIds } from './text-params.js';
import { parseWordList, toWordTensor } from './word-lists.js';

function strings(values: NamedValues, name: string): string[] {
  const v = values.get(name);
  if (v === undefined) throw badRequest(`${name} is required`, name);
  const bad = v.data.findIndex((x) => typeof x !== 'string');
  if (bad >= 0) throw badRequest(`${name}[${bad}] must be a string, got ${describeValue(v.data[bad])}`, name);
  return v.data as string[];
}

export async function runPreprocessing(ctx: ServingContext, values: NamedValues, options: Pick<RunOptions, 'signal'>): Promise<ModelRun> {
  const queries = strings(values, 'QUERY');
  const batch = queries.length;
  checkBatch(ctx, batch, `QUERY's batch of ${batch} queries`, 'QUERY');
  const biasWords = readBiasWords(values.get('EMBEDDING_BIAS_WORDS'), values.get('EMBEDDING_BIAS_WEIGHTS'),
    { words: 'EMBEDDING_BIAS_WORDS', weights: 'EMBEDDING_BIAS_WEIGHTS' });
  // Every element is read and checked before anything is tokenized.
  const elements = queries.map((query, i) => {
    const get = (name: string) => elementAt(values, name, i, batch);
    const outputLen = optInt(get('REQUEST_OUTPUT_LEN'), 'REQUEST_OUTPUT_LEN', 1);
    if (outputLen === undefined) throw badRequest('REQUEST_OUTPUT_LEN is required', 'REQUEST_OUTPUT_LEN');
    return {
      query,
      outputLen,
      endId: optInt(get('END_ID'), 'END_ID', -1) ?? ctx.defaults.endId,
      padId: optInt(get('PAD_ID'), 'PAD_ID', -1) ?? ctx.defaults.padId,
      bad: parseWordList(get('BAD_WORDS_DICT'), 'BAD_WORDS_DICT'),
      stop: parseWordList(get('STOP_WORDS_DICT'), 'STOP_WORDS_DICT'),
    };
  });
  const tokens = await tokenize(
    ctx, elements.map((e, i) => ({ text: e.query, field: batch > 1 ? `QUERY[${i}]` : 'QUERY' })),
    [...elements.flatMap((e) => [...e.bad, ...e.stop]), ...biasWordList(biasWords)], options.signal,
  );
  // Every query's bias is the same ([0] without words, as Triton's preprocessing gives an empty one).
  const bias = Array.from(biasFromWords(tokens.words, biasWords, ctx.executor.modelConfig.vocabSize) ?? []);
  return immediateRun(elements.map((e, i): OutputTensor[] => {
    const ids = tokens.prompts[i]!;
    const bad = toWordTensor(wordIds(tokens.words, e.bad));
    const stop = toWordTensor(wordIds(tokens.words, e.stop));
    return [
      { name: 'INPUT_ID', datatype: 'INT32', shape: [ids.length], data: ids, pad: e.endId },
      { name: 'REQUEST_INPUT_LEN', datatype: 'INT32', shape: [1], data: [ids.length] },
      { name: 'BAD_WORDS_IDS', datatype: 'INT32', shape: bad.shape, data: bad.data, pad: -1 },
      { name: 'STOP_WORDS_IDS', datatype: 'INT32', shape: stop.shape, data: stop.data, pad: -1 },
      { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1], data: [e.outputLen] },
      { name: 'OUT_END_ID', datatype: 'INT32', shape: [1], data: [e.endId] },
      { name: 'OUT_PAD_ID', datatype: 'INT32', shape: [1], data: [e.padId] },
      { name: 'EMBEDDING_BIAS', datatype: 'FP32', shape: [bias.length], data: bias },
    ];
  }));
}

export async function runPostprocessing(ctx: ServingContext, values: NamedValues, options: Pick<RunOptions, 'signal'>): Promise<ModelRun> {
  const v = values.get('TOKENS_BATCH');
  if (v === undefined) throw badRequest('TOKENS_BATCH is required (token ids, [batch, beams, L] or [batch, L])', 'TOKENS_BATCH');
  const bad = v.data.findIndex((x) => !Number.isSafeInteger(x));
  if (bad >= 0) throw badRequest(`TOKENS_BATCH[${bad}] must be an integer token id, got ${describeValue(v.data[bad])}`, 'TOKENS_BATCH');
  const shape = v.shape.length === 1 ? [1, v.shape[0]!] : v.shape;
  const len = shape[shape.length - 1]!;
  const rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  // The batch is the first dimension (beams are a request's own), as Triton's max_batch_size counts it.
  checkBatch(ctx, shape[0]!, `TOKENS_BATCH's batch of ${shape[0]}`, 'TOKENS_BATCH');
  const lengths = values.get('SEQUENCE_LENGTH');
  const lists: number[][] = [];
  for (let r = 0; r < rows; r += 1) {
    let ids = (v.data as number[]).slice(r * len, (r + 1) * len);
    const n = lengths ? optInt(lengths.data.length === 1 ? lengths.data[0] : lengths.data[r], 'SEQUENCE_LENGTH', 0, len) : undefined;
    if (n !== undefined) ids = ids.slice(0, n);
    const vocab = ctx.executor.modelConfig.vocabSize;
    const outOfRange = ids.find((id) => id < 0 || id >= vocab);
    if (outOfRange !== undefined) throw badRequest(`TOKENS_BATCH holds ${outOfRange}, outside [0, ${vocab}) (vocab_size)`, 'TOKENS_BATCH');
    lists.push(ids);
  }
  const texts = await detokenize(ctx, lists, options.signal);
  return immediateRun(texts.map((text) => [{ name: 'OUTPUT', datatype: 'BYTES', shape: [1], data: [text] }]));
}
