// preprocessing (text → ids) and postprocessing (ids → text), the tokenizer halves of Triton's ensemble, with
// Triton's tensor names, served directly from our tokenizer.
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import { immediateRun, type ModelRun, type OutputTensor } from './model-run.js';
import { elementAt, type NamedValues, optInt } from './named-values.js';
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

export function runPreprocessing(ctx: ServingContext, values: NamedValues): ModelRun {
  const queries = strings(values, 'QUERY');
  const batch = queries.length;
  return immediateRun(queries.map((query, i): OutputTensor[] => {
    const get = (name: string) => elementAt(values, name, i, batch);
    const outputLen = optInt(get('REQUEST_OUTPUT_LEN'), 'REQUEST_OUTPUT_LEN', 1);
    if (outputLen === undefined) throw badRequest('REQUEST_OUTPUT_LEN is required', 'REQUEST_OUTPUT_LEN');
    const ids = ctx.tokenizer.encode(query);
    const endId = optInt(get('END_ID'), 'END_ID', -1) ?? ctx.defaults.endId;
    const padId = optInt(get('PAD_ID'), 'PAD_ID', -1) ?? ctx.defaults.padId;
    const words = (name: string) => toWordTensor(wordIds(ctx.tokenizer, parseWordList(get(name), name)));
    const bad = words('BAD_WORDS_DICT');
    const stop = words('STOP_WORDS_DICT');
    return [
      { name: 'INPUT_ID', datatype: 'INT32', shape: [ids.length], data: ids, pad: endId },
      { name: 'REQUEST_INPUT_LEN', datatype: 'INT32', shape: [1], data: [ids.length] },
      { name: 'BAD_WORDS_IDS', datatype: 'INT32', shape: bad.shape, data: bad.data, pad: -1 },
      { name: 'STOP_WORDS_IDS', datatype: 'INT32', shape: stop.shape, data: stop.data, pad: -1 },
      { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1], data: [outputLen] },
      { name: 'OUT_END_ID', datatype: 'INT32', shape: [1], data: [endId] },
      { name: 'OUT_PAD_ID', datatype: 'INT32', shape: [1], data: [padId] },
    ];
  }));
}

export function runPostprocessing(ctx: ServingContext, values: NamedValues): ModelRun {
  const v = values.get('TOKENS_BATCH');
  if (v === undefined) throw badRequest('TOKENS_BATCH is required (token ids, [batch, beams, L] or [batch, L])', 'TOKENS_BATCH');
  const bad = v.data.findIndex((x) => !Number.isSafeInteger(x));
  if (bad >= 0) throw badRequest(`TOKENS_BATCH[${bad}] must be an integer token id, got ${describeValue(v.data[bad])}`, 'TOKENS_BATCH');
  const shape = v.shape.length === 1 ? [1, v.shape[0]!] : v.shape;
  const len = shape[shape.length - 1]!;
  const rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const lengths = values.get('SEQUENCE_LENGTH');
  const out: OutputTensor[][] = [];
  for (let r = 0; r < rows; r += 1) {
    let ids = (v.data as number[]).slice(r * len, (r + 1) * len);
    const n = lengths ? optInt(lengths.data.length === 1 ? lengths.data[0] : lengths.data[r], 'SEQUENCE_LENGTH', 0, len) : undefined;
    if (n !== undefined) ids = ids.slice(0, n);
    const vocab = ctx.executor.modelConfig.vocabSize;
    const outOfRange = ids.find((id) => id < 0 || id >= vocab);
    if (outOfRange !== undefined) throw badRequest(`TOKENS_BATCH holds ${outOfRange}, outside [0, ${vocab}) (vocab_size)`, 'TOKENS_BATCH');
    out.push([{ name: 'OUTPUT', datatype: 'BYTES', shape: [1], data: [ctx.tokenizer.decode(ids)] }]);
  }
  return immediateRun(out);
}
