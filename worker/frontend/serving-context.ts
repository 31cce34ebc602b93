// Everything a route needs to serve a request, gathered once at start-up and passed to each route explicitly.
import type { ServingExecutor } from '../executor/serving-executor.js';
import type { ServedAdapter } from '../options/lora-options.js';
import type { TextTokenizer } from '../tokenizer.js';
import { TokenizerPool } from '../tokenizer-pool.js';
import { byteLevelTokenBytes, type TokenBytes } from './byte-level.js';
import type { ChatTemplate } from './chat-template.js';
import { LiveRequests } from './live-requests.js';
import { LogitsBudget, logitsLimits } from './logits-budget.js';
import type { ServingMetrics } from './metrics.js';
import type { TokenDefaults } from './text-params.js';

export interface ServingContext {
  executor: ServingExecutor;
  tokenizer: TextTokenizer;            // on the event loop: only for short work (a token, a detokenizer window)
  tokenizerPool: TokenizerPool;        // prompts and long id lists, in threads (frontend/prompt-bounds.ts)
  tokenBytes: TokenBytes | undefined;  // byte-level vocabularies: the fast streaming detokenizer
  metrics: ServingMetrics;
  liveRequests: LiveRequests;         // the running requests' ids, for Triton's stop
  logitsBudget: LogitsBudget;         // the server's, shared by every model it serves
  defaults: TokenDefaults;            // end_id / pad_id when a request gives none
  servedModelName: string;            // the OpenAI model id (the checkpoint directory's name by default)
  adapters: readonly ServedAdapter[]; // the preloaded LoRA adapters (--lora-modules): OpenAI model ids of their own
  chatTemplate: ChatTemplate | undefined;
  maxBatchSize: number;
  isReady(): boolean;                 // loaded, warmed up and not draining
  unavailableReason?(): string | undefined;  // orchestrator mode: why the model's worker group cannot serve
  drainRefusal?(): string | undefined;       // while the server drains: why new requests are refused (drain-state.ts)
}

export interface ContextParts {
  executor: ServingExecutor;
  tokenizer: TextTokenizer;
  tokenizerPool?: TokenizerPool;       // started early by the caller (it loads while the executor does); else here
  modelDir: string;
  metrics: ServingMetrics;
  chatTemplate: ChatTemplate | undefined;
  servedModelName: string;
  adapters?: readonly ServedAdapter[];  // absent: none
  maxBatchSize: number;
  logitsBudget?: LogitsBudget;        // absent: one of this context's own, with the options' defaults
  isReady(): boolean;
  unavailableReason?(): string | undefined;
  drainRefusal?(): string | undefined;
}

/** A model's context: the request defaults come from its tokenizer and config (end_id: EOS, pad_id: PAD or EOS). */
export function buildServingContext(parts: ContextParts): ServingContext {
  const { modelDir, tokenizerPool, logitsBudget, adapters, ...rest } = parts;
  const config = parts.executor.modelConfig;
  const endId = parts.tokenizer.eosTokenId ?? config.eosTokenIds[0] ?? -1;
  return {
    ...rest,
    adapters: adapters ?? [],
    tokenizerPool: tokenizerPool ?? new TokenizerPool(modelDir),
    tokenBytes: byteLevelTokenBytes(modelDir),
    liveRequests: new LiveRequests(),
    logitsBudget: logitsBudget ?? new LogitsBudget(logitsLimits({})),
    defaults: { endId, padId: config.padTokenId >= 0 ? config.padTokenId : endId },
  };
}
