// A request's num_draft_tokens (the seeds' tensorrt_llm_bls input), read in the same words by every frontend that
// takes it: KServe generate, /infer and gRPC (an input of ensemble, tensorrt_llm_bls and tensorrt_llm) and OpenAI
// (a body field, as vLLM's extension fields are). At most this many guessed tokens a step for the request; 0 turns
// speculation off for it; absent: the server's --speculative-ngram. Pure.
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';

export const DRAFT_TOKENS = 'num_draft_tokens';
/** The engine's cap (native kMaxDraftTokens). */
export const MAX_DRAFT_TOKENS = 64;

/** The executor's name for it, in the client's words (http-errors.ts's inClientTerms). */
export const DRAFT_TOKENS_NAMES = { numDraftTokens: DRAFT_TOKENS } as const;

export const USE_DRAFT_LOGITS = 'use_draft_logits';

/** The seeds' use_draft_logits (tensorrt_llm_bls): false or absent is what runs; true — comparing the draft's logits
 * with the model's — is refused, since guesses here are single tokens checked against the model's own draws. */
export function readUseDraftLogits(value: unknown): void {
  if (value === undefined || value === null || value === false) return;
  throw badRequest(
    `${USE_DRAFT_LOGITS} must be false or absent, got ${describeValue(value)}: guesses here are single tokens (prompt ` +
      'lookup or a draft model\'s argmax) checked against the model\'s own draws, which keeps every output the model\'s own',
    USE_DRAFT_LOGITS,
  );
}

/** The guesses a request allows a step; undefined when it says nothing (absent or null: the server's). */
export function readDraftTokens(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < 0 || (value as number) > MAX_DRAFT_TOKENS) {
    throw badRequest(
      `${DRAFT_TOKENS} must be an integer in [0, ${MAX_DRAFT_TOKENS}] (0: no speculation; absent: the server's --speculative-ngram), got ${describeValue(value)}`,
      DRAFT_TOKENS,
    );
  }
  return value as number;
}
