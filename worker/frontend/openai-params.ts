// The request fields shared by /v1/completions and /v1/chat/completions, checked against a schema (unknown
// fields are rejected by name) and mapped onto executor parameters. Pure.
import type { SamplingParams } from '../binding/addon-types.js';
import { describeValue } from '../common/errors.js';
import { quoteName } from '../common/quote-value.js';
import { ATTENTION_WINDOW, readAttentionWindow } from './attention-window.js';
import { DRAFT_TOKENS, readDraftTokens } from './draft-tokens.js';
import { readLogitBias } from './embedding-bias.js';
import { GUIDE_KEYS } from './guided/openai-guide.js';
import { badRequest } from './http-errors.js';
import { optBool, optInt, optNumber } from './named-values.js';
import { compact } from './text-params.js';

export interface OpenAiParams {
  model: string;
  maxTokens: number | undefined;
  n: number;
  stream: boolean;
  includeUsage: boolean;
  stop: string[];
  seed: number | undefined;
  sampling: SamplingParams;       // without seed: each choice gets its own
  ignoreEos: boolean;
  maxAttentionWindow: number | undefined;   // max_attention_window_size; undefined: the server's
  numDraftTokens: number | undefined;       // num_draft_tokens; undefined: the server's
  logitBias: ReadonlyMap<number, number> | undefined;   // logit_bias: token id -> bias (every choice)
}
// The output constraint (response_format, guided_*) is read by each route (guided/openai-guide.ts): chat adds the
// one a forced tool call brings.

const COMMON_KEYS = [
  'model', 'max_tokens', 'temperature', 'top_p', 'n', 'stream', 'stream_options', 'stop', 'seed', 'presence_penalty',
  'frequency_penalty', 'logit_bias', 'user', 'top_k', 'min_tokens', 'repetition_penalty', 'ignore_eos', 'best_of',
  'length_penalty', ATTENTION_WINDOW, DRAFT_TOKENS,
];
export const COMPLETION_KEYS = new Set([...COMMON_KEYS, ...GUIDE_KEYS, 'prompt', 'echo', 'logprobs', 'suffix']);
export const CHAT_KEYS = new Set([
  ...COMMON_KEYS, ...GUIDE_KEYS, 'messages', 'logprobs', 'top_logprobs', 'max_completion_tokens', 'tools',
  'tool_choice', 'parallel_tool_calls',
]);
export const MAX_N = 16;

export function checkKeys(body: Record<string, unknown>, known: ReadonlySet<string>): void {
  for (const key of Object.keys(body)) {
    if (!known.has(key)) throw badRequest(`unknown parameter ${quoteName(key)}; supported: ${[...known].join(', ')}`, key);
  }
}

function stopList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return value === '' ? [] : [value];
  if (Array.isArray(value)) {
    const bad = value.findIndex((s) => typeof s !== 'string');
    if (bad >= 0) throw badRequest(`stop[${bad}] must be a string, got ${describeValue(value[bad])}`, 'stop');
    return (value as string[]).filter((s) => s !== '');
  }
  throw badRequest(`stop must be a string or an array of strings, got ${describeValue(value)}`, 'stop');
}

export function readOpenAiParams(body: Record<string, unknown>, maxTokensKey: 'max_tokens' | 'max_completion_tokens' = 'max_tokens'): OpenAiParams {
  if (typeof body.model !== 'string' || body.model === '') throw badRequest(`model must be a non-empty string, got ${describeValue(body.model)}`, 'model');
  const temperature = optNumber(body.temperature, 'temperature', (t) => t >= 0 && t <= 2, 'in [0, 2]') ?? 1;
  const topP = optNumber(body.top_p, 'top_p', (p) => p > 0 && p <= 1, 'in (0, 1]');
  const topK = optInt(body.top_k, 'top_k', -1);
  const n = optInt(body.n, 'n', 1, MAX_N) ?? 1;
  const bestOf = optInt(body.best_of, 'best_of', 1, MAX_N);
  if (bestOf !== undefined && bestOf !== n) throw badRequest(`best_of ${bestOf} is not supported: only best_of = n (${n})`, 'best_of');
  if (body.user !== undefined && body.user !== null && typeof body.user !== 'string') throw badRequest(`user must be a string, got ${describeValue(body.user)}`, 'user');
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && (typeof streamOptions !== 'object' || Array.isArray(streamOptions))) {
    throw badRequest(`stream_options must be an object, got ${describeValue(streamOptions)}`, 'stream_options');
  }
  const stream = optBool(body.stream, 'stream') ?? false;
  const includeUsage = optBool((streamOptions as { include_usage?: unknown } | null | undefined)?.include_usage, 'stream_options.include_usage') ?? false;
  // OpenAI's temperature implies sampling; the engine samples only when top_k or top_p is set (TensorRT-LLM's
  // default is greedy), so temperature > 0 sets top_p (1 when not given). temperature 0 is greedy.
  const sampling: SamplingParams = temperature > 0
    ? compact({ temperature, topP: topP ?? 1, topK: topK !== undefined && topK > 0 ? topK : undefined })
    : { temperature: 0 };
  Object.assign(sampling, compact<SamplingParams>({
    presencePenalty: optNumber(body.presence_penalty, 'presence_penalty', (v) => v >= -2 && v <= 2, 'in [-2, 2]'),
    frequencyPenalty: optNumber(body.frequency_penalty, 'frequency_penalty', (v) => v >= -2 && v <= 2, 'in [-2, 2]'),
    repetitionPenalty: optNumber(body.repetition_penalty, 'repetition_penalty', (v) => v > 0, '> 0'),
    lengthPenalty: optNumber(body.length_penalty, 'length_penalty', () => true, ''),
    minTokens: optInt(body.min_tokens, 'min_tokens', 0),
  }));
  const maxTokens = optInt(body[maxTokensKey] ?? (maxTokensKey === 'max_completion_tokens' ? body.max_tokens : undefined), maxTokensKey, 1);
  return {
    model: body.model,
    maxTokens,
    n,
    stream,
    includeUsage,
    stop: stopList(body.stop),
    seed: optInt(body.seed, 'seed', 0),
    sampling,
    ignoreEos: optBool(body.ignore_eos, 'ignore_eos') ?? false,
    maxAttentionWindow: readAttentionWindow(body[ATTENTION_WINDOW]),
    numDraftTokens: readDraftTokens(body[DRAFT_TOKENS]),
    logitBias: readLogitBias(body.logit_bias),
  };
}

/** The seed of choice i: the request's seed offset by i (so choices differ but repeat), or a fresh random one. */
export function choiceSeed(seed: number | undefined, i: number): number {
  return seed === undefined ? Math.floor(Math.random() * 2 ** 31) : seed + i;
}

/** OpenAI's finish_reason for the engine's. OpenAI has no word for a request that was cancelled (or timed out):
 * "abort", as vLLM's OpenAI server says, rather than presenting it as "stop" or "length". A chat choice that made
 * tool calls says "tool_calls" instead (openai-chat.ts). */
export function finishReason(reason: string | undefined): 'stop' | 'length' | 'abort' {
  if (reason === 'length') return 'length';
  if (reason === 'end_id' || reason === 'stop_words') return 'stop';
  return 'abort';
}
