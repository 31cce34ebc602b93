// A request's max_attention_window_size, read in the same words by every frontend that takes it: KServe generate,
// /infer and gRPC (an input of ensemble, tensorrt_llm_bls and tensorrt_llm) and OpenAI (a body field, as vLLM's
// extension fields are). The engine applies the smaller of it and the server's --max-attention-window-size. Pure.
import { describeValue } from '../common/errors.js';
import { INT32_MAX } from '../options/value-kinds.js';
import { badRequest } from './http-errors.js';

export const ATTENTION_WINDOW = 'max_attention_window_size';

/** The executor's name for it, in the client's words (http-errors.ts's inClientTerms). */
export const ATTENTION_WINDOW_NAMES = { maxAttentionWindow: ATTENTION_WINDOW } as const;

/** The window a request asks for; undefined when it asks for none (absent, null or 0: the server's). */
export function readAttentionWindow(value: unknown): number | undefined {
  if (value === undefined || value === null || value === 0) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < 1 || (value as number) > INT32_MAX) {
    throw badRequest(
      `${ATTENTION_WINDOW} must be an integer in [1, ${INT32_MAX}] (0 or absent: the server's window), got ${describeValue(value)}`,
      ATTENTION_WINDOW,
    );
  }
  return value as number;
}
