// The text interface of ensemble / tensorrt_llm_bls (text_input, max_tokens, ..., the seeds' BLS table) read from
// named values into one TextParams per batch element, then mapped onto the executor's NativeRequest once the texts
// are tokenized (prompt-bounds.ts). Pure; every rejection names the field and the value.
import type { GuidedDecodingParams, LoraRequest, NativeRequest, SamplingParams } from '../binding/addon-types.js';
import { describeValue } from '../common/errors.js';
import { ATTENTION_WINDOW, readAttentionWindow } from './attention-window.js';
import { DRAFT_TOKENS, readDraftTokens, readUseDraftLogits, USE_DRAFT_LOGITS } from './draft-tokens.js';
import { BIAS_WEIGHTS, BIAS_WORDS, type BiasWords, readBiasWords } from './embedding-bias.js';
import { checkBatch } from './fan-out.js';
import { readKserveGuide } from './guided/kserve-guide.js';
import { badRequest } from './http-errors.js';
import { readKserveLora } from './kserve-lora.js';
import { elementAt, type NamedValues, optBool, optInt, optNumber } from './named-values.js';
import { parseWordList } from './word-lists.js';

export interface TextParams {
  prompt: string;
  maxTokens: number;
  endId?: number;
  padId?: number;
  sampling: SamplingParams;
  stopWords: string[];
  badWords: string[];
  returnLogProbs: boolean;
  returnContextLogits: boolean;
  returnGenerationLogits: boolean;
  excludeInput: boolean;
  maxAttentionWindow: number | undefined;   // max_attention_window_size; undefined: the server's
  numDraftTokens: number | undefined;       // num_draft_tokens; undefined: the server's
  stream: boolean | undefined;   // unset: generate_stream streams, generate does not
  guidedDecoding: GuidedDecodingParams | undefined;   // guided_decoding_guide_type + guided_decoding_guide
  lora: LoraRequest | undefined;   // lora_task_id (+ lora_weights, lora_config); undefined: the base model
  biasWords: BiasWords | undefined;   // embedding_bias_words + embedding_bias_weights (every prompt of the batch)
}

/** Drops undefined entries: the facade rejects nothing for them, but the native side should not see them at all. */
export function compact<T extends object>(object: T): T {
  for (const key of Object.keys(object) as (keyof T)[]) if (object[key] === undefined) delete object[key];
  return object;
}

/**
 * Sampling as TensorRT-LLM reads it: top_k = 0 and top_p = 0 both mean "off", and with neither set the engine
 * decodes greedily whatever the temperature.
 */
export function samplingFrom(get: (name: string) => unknown, names: { topK: string; topP: string }): SamplingParams {
  const topK = optInt(get(names.topK), names.topK, 0);
  const topP = optNumber(get(names.topP), names.topP, (n) => n >= 0 && n <= 1, 'in [0, 1]');
  const lengthPenalty = get('length_penalty') ?? get('len_penalty');
  return compact<SamplingParams>({
    temperature: optNumber(get('temperature'), 'temperature', (n) => n >= 0, '>= 0'),
    topK: topK === 0 ? undefined : topK,
    topP: topP === 0 ? undefined : topP,
    lengthPenalty: optNumber(lengthPenalty, get('length_penalty') !== undefined ? 'length_penalty' : 'len_penalty', () => true, ''),
    repetitionPenalty: optNumber(get('repetition_penalty'), 'repetition_penalty', (n) => n > 0, '> 0'),
    presencePenalty: optNumber(get('presence_penalty'), 'presence_penalty', () => true, ''),
    frequencyPenalty: optNumber(get('frequency_penalty'), 'frequency_penalty', () => true, ''),
    minTokens: optInt(get('min_length'), 'min_length', 0),
    seed: optInt(get('random_seed'), 'random_seed', 0),
    beamWidth: optInt(get('beam_width'), 'beam_width', 1),
  });
}

/** The name of prompt i of a batch of `batch`, as rejections say it. */
export function textInputField(i: number, batch: number): string {
  return batch > 1 ? `text_input[${i}]` : 'text_input';
}

/** The batch: text_input holds one prompt, or a list of them — at most the model's max batch size. */
export function textBatch(values: NamedValues, maxBatchSize: number): string[] {
  const v = values.get('text_input');
  if (v === undefined) throw badRequest('text_input is required (the prompt text)', 'text_input');
  if (v.data.length === 0) throw badRequest('text_input is empty; send a prompt or a list of prompts', 'text_input');
  checkBatch({ maxBatchSize }, v.data.length, `text_input's batch of ${v.data.length} prompts`, 'text_input');
  v.data.forEach((p, i) => {
    if (typeof p !== 'string') throw badRequest(`${textInputField(i, v.data.length)} must be a string, got ${describeValue(p)}`, 'text_input');
    if (p === '') throw badRequest(`${textInputField(i, v.data.length)} is an empty string; a prompt needs text`, 'text_input');
  });
  return v.data as string[];
}

export function readTextParams(values: NamedValues, maxBatchSize: number): TextParams[] {
  const prompts = textBatch(values, maxBatchSize);
  const batch = prompts.length;
  const loras = readKserveLora(values, batch);
  const biasWords = readBiasWords(values.get(BIAS_WORDS), values.get(BIAS_WEIGHTS));
  return prompts.map((prompt, i) => {
    const get = (name: string) => elementAt(values, name, i, batch);
    const maxTokens = optInt(get('max_tokens'), 'max_tokens', 1);
    if (maxTokens === undefined) throw badRequest('max_tokens is required (the number of tokens to generate)', 'max_tokens');
    readUseDraftLogits(get(USE_DRAFT_LOGITS));
    const words = (name: string) => {
      const v = values.get(name);
      // A list as long as the batch is one entry per prompt; any other list is one list for every prompt.
      if (v === undefined) return [];
      if (batch > 1 && v.data.length === batch && v.data.every((x) => typeof x === 'string')) return parseWordList(v.data[i], name);
      return parseWordList(v.shape.length === 1 && v.data.length === 1 ? v.data[0] : v.data, name);
    };
    return {
      prompt,
      maxTokens,
      endId: optInt(get('end_id'), 'end_id', -1),
      padId: optInt(get('pad_id'), 'pad_id', -1),
      sampling: samplingFrom(get, { topK: 'top_k', topP: 'top_p' }),
      stopWords: words('stop_words'),
      badWords: words('bad_words'),
      returnLogProbs: optBool(get('return_log_probs'), 'return_log_probs') ?? false,
      returnContextLogits: optBool(get('return_context_logits'), 'return_context_logits') ?? false,
      returnGenerationLogits: optBool(get('return_generation_logits'), 'return_generation_logits') ?? false,
      excludeInput: optBool(get('exclude_input_in_output'), 'exclude_input_in_output') ?? false,
      stream: optBool(get('stream'), 'stream'),
      maxAttentionWindow: readAttentionWindow(get(ATTENTION_WINDOW)),
      numDraftTokens: readDraftTokens(get(DRAFT_TOKENS)),
      guidedDecoding: readKserveGuide(get),
      lora: loras[i],
      biasWords,
    };
  });
}

/** Stop/bad words as token-id lists, from their ids tokenized alone and without special tokens (as Triton's
 * preprocessing does; prompt-bounds.ts's tokenize); a word with no tokens is left out. */
export function wordIds(encoded: ReadonlyMap<string, number[]>, words: readonly string[]): number[][] {
  return words.map((w) => encoded.get(w) ?? []).filter((ids) => ids.length > 0);
}

export interface TokenDefaults { endId: number; padId: number }

/** `embeddingBias`: what p.biasWords make once tokenized (embedding-bias.ts's biasFromWords). */
export function textNativeRequest(
  p: TextParams, inputTokenIds: number[], words: ReadonlyMap<string, number[]>, defaults: TokenDefaults, streaming: boolean,
  embeddingBias?: Float32Array,
): NativeRequest {
  const stopWords = wordIds(words, p.stopWords);
  const badWords = wordIds(words, p.badWords);
  return compact<NativeRequest>({
    inputTokenIds,
    maxTokens: p.maxTokens,
    streaming,
    endId: p.endId ?? defaults.endId,
    padId: p.padId ?? defaults.padId,
    stopWords: stopWords.length > 0 ? stopWords : undefined,
    badWords: badWords.length > 0 ? badWords : undefined,
    embeddingBias,
    sampling: p.sampling,
    maxAttentionWindow: p.maxAttentionWindow,
    numDraftTokens: p.numDraftTokens,
    guidedDecoding: p.guidedDecoding,
    lora: p.lora,
    // The prompt text is prepended from the request itself, which is exact where decode(encode(prompt)) is not.
    output: {
      returnLogProbs: p.returnLogProbs,
      returnContextLogits: p.returnContextLogits,
      returnGenerationLogits: p.returnGenerationLogits,
      excludeInputFromOutput: true,
    },
  });
}
