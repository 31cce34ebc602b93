// Bounded work per prompt, decided before the expensive step: a text too long in bytes to be a prompt of this model
// is refused unread (worker/tokenizer-bound.ts says why the bound holds), and the rest is tokenized in the tokenizer
// pool's threads (worker/tokenizer-pool.ts), never on the event loop — so a maximal prompt delays neither the
// health checks nor anybody else's request. Every entry point that turns text into ids comes through here: KServe
// generate and infer (text models, preprocessing), gRPC ModelInfer / ModelStreamInfer, OpenAI completions and chat.
import type { RequestLimits } from '../executor/validate-request.js';
import { TokenizeAborted } from '../tokenizer-pool.js';
import { badRequest, HttpError } from './http-errors.js';
import type { ServingContext } from './serving-context.js';

export interface PromptLimit {
  tokens: number;   // the most tokens any prompt of this model may have
  why: string;      // the setting that says so
}

/** Room for one output token within max_seq_len and, without chunked context, one iteration's max_num_tokens. */
export function promptTokenLimit(limits: RequestLimits): PromptLimit {
  const bySeq = limits.maxSeqLen - 1;
  if (!limits.chunkedContext && limits.maxNumTokens < bySeq) {
    return { tokens: limits.maxNumTokens, why: `max_num_tokens ${limits.maxNumTokens}, without chunked context` };
  }
  return { tokens: bySeq, why: `max_seq_len ${limits.maxSeqLen} less one output token` };
}

type BoundsContext = Pick<ServingContext, 'tokenizer' | 'executor' | 'tokenizerPool'>;

/** 400 naming `field` when `text` has more UTF-8 bytes than any prompt of this model can; nothing is tokenized. */
export function checkPromptBytes(ctx: BoundsContext, text: string, field: string): void {
  const perToken = ctx.tokenizer.byteBound.bytesPerToken;
  if (perToken === undefined) return;
  const limit = promptTokenLimit(ctx.executor.limits);
  const maxBytes = limit.tokens * perToken;
  // A UTF-16 unit is at least one UTF-8 byte: a text longer in units is too long without counting its bytes.
  if (text.length <= maxBytes) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes <= maxBytes) return;
    throw tooManyBytes(field, `${bytes} bytes of UTF-8`, limit, perToken, maxBytes);
  }
  throw tooManyBytes(field, `at least ${text.length} bytes of UTF-8 (${text.length} characters)`, limit, perToken, maxBytes);
}

/** The request field a rejection's `param` names: "prompt" for "prompt[3]", "messages" for "messages (...)". */
function paramOf(field: string): string {
  return field.replace(/[[ ].*$/, '');
}

function tooManyBytes(field: string, size: string, limit: PromptLimit, perToken: number, maxBytes: number): HttpError {
  return badRequest(
    `${field} is ${size}, more than any prompt this model takes: at most ${limit.tokens} tokens (${limit.why}) ` +
    `of at most ${perToken} bytes each (the most text one of this tokenizer's tokens stands for) is ${maxBytes} bytes`, paramOf(field),
  );
}

export interface PromptText {
  text: string;
  field: string;                 // named in a rejection: "prompt[3]", "text_input", "messages"
  addSpecialTokens?: boolean;    // default true (the BOS a model's template adds)
}

/**
 * The ids of each prompt and of each word (stop/bad words: alone, without special tokens, as Triton's
 * preprocessing), in one job of the tokenizer pool. Prompts are checked by size first and by token count after:
 * one that cannot fit this model is a 400 naming its field. The client going away drops the job.
 */
export async function tokenize(
  ctx: BoundsContext, prompts: readonly PromptText[], words: readonly string[], signal: AbortSignal,
): Promise<{ prompts: number[][]; words: Map<string, number[]> }> {
  for (const p of prompts) checkPromptBytes(ctx, p.text, p.field);
  const limit = promptTokenLimit(ctx.executor.limits);
  const uniqueWords = [...new Set(words)];
  let results;
  try {
    results = await ctx.tokenizerPool.encode([
      ...prompts.map((p) => ({ text: p.text, addSpecialTokens: p.addSpecialTokens ?? true, limit: limit.tokens })),
      ...uniqueWords.map((text) => ({ text, addSpecialTokens: false })),
    ], signal);
  } catch (error) {
    throw abandoned(error);
  }
  const promptIds = prompts.map((p, i) => {
    const r = results[i]!;
    if ('count' in r) {
      throw badRequest(`${p.field} is ${r.count} tokens, more than any prompt this model takes: at most ${limit.tokens} (${limit.why})`, paramOf(p.field));
    }
    return r.ids;
  });
  const wordIds = new Map(uniqueWords.map((w, i) => [w, (results[prompts.length + i] as { ids: number[] }).ids]));
  return { prompts: promptIds, words: wordIds };
}

/** Id lists as text, in the tokenizer pool. */
export async function detokenize(ctx: BoundsContext, lists: readonly (readonly number[])[], signal: AbortSignal): Promise<string[]> {
  try {
    return await ctx.tokenizerPool.decode(lists, signal);
  } catch (error) {
    throw abandoned(error);
  }
}

/** 400 naming `field` when a prompt given as ids is longer than any prompt of this model (before it is decoded). */
export function checkPromptIds(ctx: BoundsContext, count: number, field: string): void {
  const limit = promptTokenLimit(ctx.executor.limits);
  if (count > limit.tokens) {
    throw badRequest(`${field} has ${count} token ids, more than any prompt this model takes: at most ${limit.tokens} (${limit.why})`, paramOf(field));
  }
}

// A request abandoned while tokenizing has nobody to answer: a status below 500 keeps it out of the error log.
function abandoned(error: unknown): unknown {
  return error instanceof TokenizeAborted ? new HttpError(499, error.message) : error;
}
