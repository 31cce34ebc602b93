// A request's LoRA inputs (the seeds' lora_task_id, lora_weights, lora_config), read in the same words by every
// KServe frontend that takes them: generate, /infer and gRPC, for ensemble, tensorrt_llm_bls and tensorrt_llm.
// lora_task_id alone names an adapter the server holds (a --lora-modules one: 1, 2, ... in their order, or one an
// earlier request sent); with lora_weights + lora_config (TensorRT-LLM's layout, as hf_lora_convert.py writes it)
// the request brings its adapter, cached under that id for later requests. What the tensors hold is the engine's
// check (native/engine/lora/lora-tensors.h names the row and module at fault); here, which go together and their
// shapes. Pure.
import type { LoraRequest } from '../binding/addon-types.js';
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import { elementAt, type NamedValue, type NamedValues } from './named-values.js';

export const LORA_TASK_ID = 'lora_task_id';
export const LORA_WEIGHTS = 'lora_weights';
export const LORA_CONFIG = 'lora_config';

/** The three as a Triton model declares them (the seeds' config.pbtxt; FP32 and BF16 weights are read too). */
export const LORA_INPUT_SPECS = [
  { name: LORA_TASK_ID, datatype: 'UINT64', shape: [1] },
  { name: LORA_WEIGHTS, datatype: 'FP16', shape: [-1, -1] },
  { name: LORA_CONFIG, datatype: 'INT32', shape: [-1, 3] },
] as const;

/** The executor's names for them, in the client's words (http-errors.ts's inClientTerms). */
export const LORA_NAMES = { 'lora.taskId': LORA_TASK_ID, 'lora.weights': LORA_WEIGHTS, 'lora.config': LORA_CONFIG } as const;

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** A task id: what a client sends as UINT64 (or INT64 / INT32), non-negative, exact as a JS number. */
function taskId(value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw badRequest(`${LORA_TASK_ID} must be an integer >= 0 (below 2^53), got ${describeValue(value)}`, LORA_TASK_ID);
  }
  return value as number;
}

/** [rows, cols] of a tensor given as [1, rows, cols] or [rows, cols]; `cols` fixes the last dimension (lora_config's 3). */
function matrixShape(name: string, v: NamedValue, cols?: number): [number, number] {
  const dims = v.shape.length === 3 && v.shape[0] === 1 ? v.shape.slice(1) : v.shape;
  const ok = dims.length === 2 && dims[0]! >= 1 && dims[1]! >= 1 && (cols === undefined || dims[1] === cols);
  if (!ok) {
    const want = cols === undefined ? '[1, rows, cols] or [rows, cols]' : `[1, rows, ${cols}] or [rows, ${cols}]`;
    throw badRequest(`${name} must have shape ${want} (one row per module and layer), got [${v.shape.join(', ')}]`, name);
  }
  return dims as [number, number];
}

/** lora_weights' values (FP32, FP16 or BF16 on the wire; numbers in a generate body) as float32. */
function weightsOf(v: NamedValue): Float32Array {
  if (v.data instanceof Float32Array) return v.data;  // (binary: decoded typed, every element checked finite)
  const out = new Float32Array(v.data.length);
  for (let i = 0; i < v.data.length; i += 1) {
    const x = v.data[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) throw badRequest(`${LORA_WEIGHTS}[${i}] must be a finite number, got ${describeValue(x)}`, LORA_WEIGHTS);
    out[i] = x;
  }
  return out;
}

/** lora_config's rows of (module_id, layer_idx, adapter_size) as int32. */
function configOf(v: NamedValue): Int32Array {
  const out = new Int32Array(v.data.length);
  for (let i = 0; i < v.data.length; i += 1) {
    const x = v.data[i];
    if (!Number.isSafeInteger(x) || (x as number) < INT32_MIN || (x as number) > INT32_MAX) {
      throw badRequest(`${LORA_CONFIG}[${i}] must be a 32-bit integer, got ${describeValue(x)}`, LORA_CONFIG);
    }
    out[i] = x as number;
  }
  return out;
}

/** The adapter a request brings (lora_weights + lora_config), or undefined when it brings none. */
function sentAdapter(values: NamedValues): Omit<LoraRequest, 'taskId'> | undefined {
  const weights = values.get(LORA_WEIGHTS);
  const config = values.get(LORA_CONFIG);
  if (weights === undefined && config === undefined) return undefined;
  if (weights === undefined || config === undefined) {
    const [given, missing] = weights === undefined ? [LORA_CONFIG, LORA_WEIGHTS] : [LORA_WEIGHTS, LORA_CONFIG];
    throw badRequest(`${given} needs ${missing}: an adapter sent with a request is both tensors (TensorRT-LLM's layout)`, missing);
  }
  const weightsShape = matrixShape(LORA_WEIGHTS, weights);
  const configShape = matrixShape(LORA_CONFIG, config, 3);
  return { weights: weightsOf(weights), weightsShape, config: configOf(config), configShape };
}

/** Each batch element's LoRA (undefined: the base model). lora_task_id holds one id for every element or one per
 * element; an adapter sent with the request is one adapter, so its lora_task_id holds one id. */
export function readKserveLora(values: NamedValues, batch: number): (LoraRequest | undefined)[] {
  const adapter = sentAdapter(values);
  const ids = values.get(LORA_TASK_ID);
  if (ids === undefined) {
    if (adapter) {
      throw badRequest(`${LORA_WEIGHTS} and ${LORA_CONFIG} need ${LORA_TASK_ID}: the id the adapter is cached under (later requests name it alone)`, LORA_TASK_ID);
    }
    return new Array<undefined>(batch).fill(undefined);
  }
  if (adapter && ids.data.length !== 1) {
    throw badRequest(`${LORA_TASK_ID} must hold one id with ${LORA_WEIGHTS} and ${LORA_CONFIG} (they are one adapter), got ${ids.data.length}`, LORA_TASK_ID);
  }
  return Array.from({ length: batch }, (_, i) => ({ taskId: taskId(elementAt(values, LORA_TASK_ID, i, batch)), ...adapter }));
}
