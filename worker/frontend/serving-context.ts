// Everything a route needs to serve a request, gathered once at start-up and passed to each route explicitly.
import type { ServingExecutor } from '../executor/serving-executor.js';
import type { TextTokenizer } from '../tokenizer.js';
import type { TokenBytes } from './byte-level.js';
import type { ChatTemplate } from './chat-template.js';
import type { ServingMetrics } from './metrics.js';
import type { RequestRegistry } from './request-registry.js';
import type { TokenDefaults } from './text-params.js';

export interface ServingContext {
  executor: ServingExecutor;
  tokenizer: TextTokenizer;
  tokenBytes: TokenBytes | undefined;  // byte-level vocabularies: the fast streaming detokenizer
  metrics: ServingMetrics;
  registry: RequestRegistry;
  defaults: TokenDefaults;            // end_id / pad_id when a request gives none
  servedModelName: string;            // the OpenAI model id (the checkpoint directory's name by default)
  chatTemplate: ChatTemplate | undefined;
  maxBatchSize: number;
  isReady(): boolean;                 // loaded, warmed up and not draining
  unavailableReason?(): string | undefined;  // orchestrator mode: why the model's worker group cannot serve
}
