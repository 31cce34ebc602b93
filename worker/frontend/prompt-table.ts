// P-tuning inputs (the seeds' prompt_embedding_table + prompt_vocab_size; TensorRT-LLM's PromptTuningConfig), read
// in the same words by every KServe frontend that takes them: generate, /infer and gRPC, for tensorrt_llm, ensemble
// and tensorrt_llm_bls. The table is [prompt_vocab_size, hidden_size] (Triton sends [1, prompt_vocab_size, hidden]),
// in the model's data type (FP16, BF16 or FP32; JSON numbers in a generate body). A prompt id vocab_size + i is a
// "virtual token": the model embeds it as row i of the table. Pure; every rejection names the input and the numbers.
import type { PromptTuning } from '../binding/addon-types.js';
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import type { NamedValue, NamedValues } from './named-values.js';

export const PROMPT_TABLE = 'prompt_embedding_table';
export const PROMPT_VOCAB_SIZE = 'prompt_vocab_size';
const TABLE_DATATYPES = new Set(['FP16', 'BF16', 'FP32']);

/** The two as a Triton model declares them (the seeds' config.pbtxt: the model's data type; BF16 and FP32 too). */
export const PROMPT_TABLE_INPUT_SPECS = [
  { name: PROMPT_TABLE, datatype: 'FP16', shape: [-1, -1] },
  { name: PROMPT_VOCAB_SIZE, datatype: 'INT32', shape: [1] },
] as const;

/** The executor's names for them, in the client's words (http-errors.ts's inClientTerms). */
export const PROMPT_TABLE_NAMES = { 'promptTuning.embeddingTable': PROMPT_TABLE, 'promptTuning.shape': `${PROMPT_TABLE}'s shape` } as const;

/** [rows, width] of a table given as [rows, width] or [1, rows, width]. */
function tableShape(v: NamedValue, hidden: number): [number, number] {
  const dims = v.shape.length === 3 && v.shape[0] === 1 ? v.shape.slice(1) : v.shape;
  if (dims.length !== 2 || dims[0]! < 1) {
    throw badRequest(`${PROMPT_TABLE} must have shape [prompt_vocab_size, ${hidden}] or [1, prompt_vocab_size, ${hidden}] (hidden_size ${hidden}) with at least one row, got [${v.shape.join(', ')}]`, PROMPT_TABLE);
  }
  return dims as [number, number];
}

/** The values as float32, each finite (binary tensors come typed and were checked finite when decoded). */
function tableValues(v: NamedValue, width: number): Float32Array {
  if (v.data instanceof Float32Array) return v.data;
  const out = new Float32Array(v.data.length);
  for (let i = 0; i < v.data.length; i += 1) {
    const x = v.data[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) {
      throw badRequest(`${PROMPT_TABLE}[${Math.floor(i / width)}][${i % width}] must be a finite number, got ${describeValue(x)}`, PROMPT_TABLE);
    }
    out[i] = x;
  }
  return out;
}

/** The request's table, or undefined when it sends none; `hidden`: the model's hidden_size. */
export function readPromptTable(values: NamedValues, hidden: number): PromptTuning | undefined {
  const table = values.get(PROMPT_TABLE);
  const size = values.get(PROMPT_VOCAB_SIZE);
  if (table === undefined) {
    if (size !== undefined) throw badRequest(`${PROMPT_VOCAB_SIZE} needs ${PROMPT_TABLE} (the rows it counts)`, PROMPT_VOCAB_SIZE);
    return undefined;
  }
  if (table.datatype !== undefined && !TABLE_DATATYPES.has(table.datatype)) {
    throw badRequest(`${PROMPT_TABLE} must be FP16, BF16 or FP32 (the model's data type), got ${table.datatype}`, PROMPT_TABLE);
  }
  const [rows, width] = tableShape(table, hidden);
  if (width !== hidden) {
    throw badRequest(`${PROMPT_TABLE} rows have width ${width} but must have the model's hidden_size ${hidden} (shape [${table.shape.join(', ')}])`, PROMPT_TABLE);
  }
  if (size !== undefined) {
    const n = size.data.length === 1 ? size.data[0] : undefined;
    if (!Number.isSafeInteger(n)) throw badRequest(`${PROMPT_VOCAB_SIZE} must be one integer, got ${describeValue(size.data.length === 1 ? n : size.data)}`, PROMPT_VOCAB_SIZE);
    if (n !== rows) throw badRequest(`${PROMPT_VOCAB_SIZE} ${n as number} does not match the ${rows} rows of ${PROMPT_TABLE}`, PROMPT_VOCAB_SIZE);
  }
  return { embeddingTable: tableValues(table, width), shape: [rows, width] };
}

/** Every id of `ids` (the input `field`) is a real token or one of the table's virtual ones. Only with a table:
 * without one, ids past the vocabulary stay the executor's error. */
export function checkVirtualIds(ids: readonly number[], vocabSize: number, tuning: PromptTuning, field: string): void {
  const end = vocabSize + tuning.shape[0];
  const bad = ids.findIndex((id) => id < 0 || id >= end);
  if (bad >= 0) {
    throw badRequest(`${field}[${bad}] = ${ids[bad]!} is out of range [0, ${end}) (vocab_size ${vocabSize} + prompt_vocab_size ${tuning.shape[0]}: ids past vocab_size name ${PROMPT_TABLE} rows)`, field);
  }
}

/** The virtual ids of every row of the table, in order: what a text prompt runs with before its own tokens (nothing
 * in a text can name a virtual token, so the table's rows lead the prompt, as NeMo's p-tuning does). */
export function virtualIds(vocabSize: number, tuning: PromptTuning | undefined): number[] {
  return tuning === undefined ? [] : Array.from({ length: tuning.shape[0] }, (_, i) => vocabSize + i);
}
