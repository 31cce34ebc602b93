// The models a Triton TensorRT-LLM repository serves, as the seeds describe them, with their input and output
// tensors: the leader answers for all five from one executor and one tokenizer. Pure data plus lookups.
import { quoteName } from '../common/quote-value.js';
import { GUIDE_INPUT, GUIDE_TYPE_INPUT } from './guided/kserve-guide.js';
import { notFound } from './http-errors.js';
import { LORA_INPUT_SPECS } from './kserve-lora.js';
import { MODEL_VERSION } from './metrics.js';
import { PROMPT_TABLE_INPUT_SPECS } from './prompt-table.js';

export type ModelKind = 'text' | 'tokens' | 'preprocessing' | 'postprocessing';
export interface TensorSpec { name: string; datatype: string; shape: number[]; optional?: boolean }
export interface ServedModel {
  name: string;
  kind: ModelKind;
  platform: string;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
}

const t = (name: string, datatype: string, shape: number[], optional = true): TensorSpec => ({ name, datatype, shape, optional });

// TensorRT-LLM's guided decoding (guided/kserve-guide.ts), on the text models and tensorrt_llm alike.
const GUIDE_INPUTS: TensorSpec[] = [t(GUIDE_TYPE_INPUT, 'BYTES', [1]), t(GUIDE_INPUT, 'BYTES', [1])];
// LoRA adapters (kserve-lora.ts), likewise.
const LORA_INPUTS: TensorSpec[] = LORA_INPUT_SPECS.map((s) => t(s.name, s.datatype, [...s.shape]));
// P-tuning tables (prompt-table.ts), likewise.
const PROMPT_TABLE_INPUTS: TensorSpec[] = PROMPT_TABLE_INPUT_SPECS.map((s) => t(s.name, s.datatype, [...s.shape]));

// The text interface of ensemble and tensorrt_llm_bls (the seeds' BLS tables).
const TEXT_INPUTS: TensorSpec[] = [
  t('text_input', 'BYTES', [-1], false), t('max_tokens', 'INT32', [-1], false), t('bad_words', 'BYTES', [-1]),
  t('stop_words', 'BYTES', [-1]), t('end_id', 'INT32', [1]), t('pad_id', 'INT32', [1]), t('temperature', 'FP32', [1]),
  t('top_k', 'INT32', [1]), t('top_p', 'FP32', [1]), t('length_penalty', 'FP32', [1]), t('len_penalty', 'FP32', [1]),
  t('repetition_penalty', 'FP32', [1]), t('min_length', 'INT32', [1]), t('presence_penalty', 'FP32', [1]),
  t('frequency_penalty', 'FP32', [1]), t('random_seed', 'UINT64', [1]), t('return_log_probs', 'BOOL', [1]),
  t('return_context_logits', 'BOOL', [1]), t('return_generation_logits', 'BOOL', [1]), t('beam_width', 'INT32', [1]),
  t('stream', 'BOOL', [1]), t('exclude_input_in_output', 'BOOL', [1]), t('stop', 'BOOL', [1]),
  t('max_attention_window_size', 'INT32', [1]), t('num_draft_tokens', 'INT32', [1]), t('use_draft_logits', 'BOOL', [1]),
  t('embedding_bias_words', 'BYTES', [-1]), t('embedding_bias_weights', 'FP32', [-1]), ...GUIDE_INPUTS, ...LORA_INPUTS, ...PROMPT_TABLE_INPUTS,
];
const TEXT_OUTPUTS: TensorSpec[] = [
  t('text_output', 'BYTES', [-1]), t('cum_log_probs', 'FP32', [-1]), t('output_log_probs', 'FP32', [-1, -1]),
  t('context_logits', 'FP32', [-1, -1]), t('generation_logits', 'FP32', [-1, -1, -1]), t('batch_index', 'INT32', [1]),
];

// tensorrt_llm's token-level interface (Triton's input and output names).
const TOKEN_INPUTS: TensorSpec[] = [
  t('input_ids', 'INT32', [-1], false), t('input_lengths', 'INT32', [1]), t('request_output_len', 'INT32', [1], false),
  t('end_id', 'INT32', [1]), t('pad_id', 'INT32', [1]), t('beam_width', 'INT32', [1]), t('temperature', 'FP32', [1]),
  t('runtime_top_k', 'INT32', [1]), t('runtime_top_p', 'FP32', [1]), t('len_penalty', 'FP32', [1]),
  t('repetition_penalty', 'FP32', [1]), t('min_length', 'INT32', [1]), t('presence_penalty', 'FP32', [1]),
  t('frequency_penalty', 'FP32', [1]), t('random_seed', 'UINT64', [1]), t('return_log_probs', 'BOOL', [1]),
  t('return_context_logits', 'BOOL', [1]), t('return_generation_logits', 'BOOL', [1]), t('stop_words_list', 'INT32', [2, -1]),
  t('bad_words_list', 'INT32', [2, -1]), t('streaming', 'BOOL', [1]), t('stop', 'BOOL', [1]),
  t('exclude_input_in_output', 'BOOL', [1]), t('max_attention_window_size', 'INT32', [1]),
  t('num_draft_tokens', 'INT32', [1]), t('embedding_bias', 'FP32', [-1]), ...GUIDE_INPUTS, ...LORA_INPUTS, ...PROMPT_TABLE_INPUTS,
];
const TOKEN_OUTPUTS: TensorSpec[] = [
  t('output_ids', 'INT32', [-1, -1]), t('sequence_length', 'INT32', [-1]), t('cum_log_probs', 'FP32', [-1]),
  t('output_log_probs', 'FP32', [-1, -1]), t('context_logits', 'FP32', [-1, -1]),
  t('generation_logits', 'FP32', [-1, -1, -1]), t('batch_index', 'INT32', [1]),
];

const PRE_INPUTS: TensorSpec[] = [
  t('QUERY', 'BYTES', [1], false), t('REQUEST_OUTPUT_LEN', 'INT32', [1], false), t('BAD_WORDS_DICT', 'BYTES', [-1]),
  t('STOP_WORDS_DICT', 'BYTES', [-1]), t('END_ID', 'INT32', [1]), t('PAD_ID', 'INT32', [1]),
  t('EMBEDDING_BIAS_WORDS', 'BYTES', [-1]), t('EMBEDDING_BIAS_WEIGHTS', 'FP32', [-1]),
];
const PRE_OUTPUTS: TensorSpec[] = [
  t('INPUT_ID', 'INT32', [-1]), t('REQUEST_INPUT_LEN', 'INT32', [1]), t('BAD_WORDS_IDS', 'INT32', [2, -1]),
  t('STOP_WORDS_IDS', 'INT32', [2, -1]), t('REQUEST_OUTPUT_LEN', 'INT32', [-1]), t('OUT_END_ID', 'INT32', [1]),
  t('OUT_PAD_ID', 'INT32', [1]), t('EMBEDDING_BIAS', 'FP32', [-1]),
];
const POST_INPUTS: TensorSpec[] = [t('TOKENS_BATCH', 'INT32', [-1, -1], false), t('SEQUENCE_LENGTH', 'INT32', [-1])];
const POST_OUTPUTS: TensorSpec[] = [t('OUTPUT', 'BYTES', [-1])];

export const SERVED_MODELS: readonly ServedModel[] = [
  { name: 'ensemble', kind: 'text', platform: 'ensemble', inputs: TEXT_INPUTS, outputs: TEXT_OUTPUTS },
  { name: 'tensorrt_llm_bls', kind: 'text', platform: 'python', inputs: TEXT_INPUTS, outputs: TEXT_OUTPUTS },
  { name: 'tensorrt_llm', kind: 'tokens', platform: 'tensorrtllm', inputs: TOKEN_INPUTS, outputs: TOKEN_OUTPUTS },
  { name: 'preprocessing', kind: 'preprocessing', platform: 'python', inputs: PRE_INPUTS, outputs: PRE_OUTPUTS },
  { name: 'postprocessing', kind: 'postprocessing', platform: 'python', inputs: POST_INPUTS, outputs: POST_OUTPUTS },
];
export const MODEL_NAMES = SERVED_MODELS.map((m) => m.name);
const BY_NAME = new Map(SERVED_MODELS.map((m) => [m.name, m]));
const INPUT_NAMES = new Map(SERVED_MODELS.map((m) => [m.name, new Set(m.inputs.map((i) => i.name))]));

/** The model, or a 404 naming what exists. A version, when given, must be ours. */
export function findModel(name: string, version?: string): ServedModel {
  const model = BY_NAME.get(name);
  if (!model) throw notFound(`unknown model ${quoteName(name)}; this server serves ${MODEL_NAMES.join(', ')}`);
  if (version !== undefined && version !== '' && version !== MODEL_VERSION) {
    throw notFound(`model ${quoteName(name)} has no version ${quoteName(version)}; available: ${MODEL_VERSION}`);
  }
  return model;
}

export function inputNames(model: ServedModel): ReadonlySet<string> {
  return INPUT_NAMES.get(model.name)!;
}

export function modelMetadata(model: ServedModel): unknown {
  return {
    name: model.name,
    versions: [MODEL_VERSION],
    platform: model.platform,
    inputs: model.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    outputs: model.outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
  };
}

/** A Triton-style model config: what clients read to find limits and whether the model streams (decoupled). */
export function modelConfigJson(model: ServedModel, limits: { maxBatchSize: number; maxBeamWidth: number; vocabSize: number }): unknown {
  const dims = (shape: number[]) => shape.map(String);
  return {
    name: model.name,
    platform: model.platform,
    backend: model.platform === 'tensorrtllm' ? 'tensorrtllm' : model.platform === 'python' ? 'python' : '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: limits.maxBatchSize,
    input: model.inputs.map((i) => ({ name: i.name, data_type: `TYPE_${i.datatype === 'BYTES' ? 'STRING' : i.datatype}`, dims: dims(i.shape), optional: i.optional ?? true })),
    output: model.outputs.map((o) => ({ name: o.name, data_type: `TYPE_${o.datatype === 'BYTES' ? 'STRING' : o.datatype}`, dims: dims(o.shape) })),
    model_transaction_policy: { decoupled: model.kind === 'text' || model.kind === 'tokens' },
    // vocab_size lets token-level clients (the bench's random prompts) stay inside the vocabulary.
    parameters: { max_beam_width: { string_value: String(limits.maxBeamWidth) }, vocab_size: { string_value: String(limits.vocabSize) } },
  };
}
