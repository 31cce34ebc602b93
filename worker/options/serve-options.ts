// What one process serving one model runs with (worker/serve.ts's startServer, a rank of a cluster, a worker group
// of the orchestrator): the frontend's settings and the executor's. Derived from the options a rank was given by
// serve-options-from-cli.ts; the executor's part is picked out by executor-options.ts.
import type { SchedulerPolicy } from '../binding/addon-types.js';
import type { LogLevel } from '../log.js';

export interface ServeOptions {
  model: string;
  host: string;
  httpPort: number;              // 0: any free port (tests)
  metricsPort: number;
  grpcPort?: number | undefined; // KServe v2 gRPC; undefined: no gRPC port
  apiKey?: string | undefined;
  authHealth: boolean;
  authMetrics: boolean;
  maxBodyBytes: number;
  allowAnyContentType?: boolean | undefined;  // JSON endpoints read any Content-Type (frontend/content-type.ts)
  maxLogitsBytesPerRequest?: number | undefined;  // absent: the option's default (worker/frontend/logits-budget.ts)
  maxLogitsBytesInFlight?: number | undefined;
  servedModelName?: string | undefined;
  threads?: number | undefined;
  maxBatchSize?: number | undefined;
  maxQueueSize?: number | undefined;
  maxNumTokens?: number | undefined;
  maxSeqLen?: number | undefined;
  maxTokensInPagedKvCache?: number | undefined;
  tokensPerBlock?: number | undefined;
  schedulerPolicy?: SchedulerPolicy | undefined;
  enableChunkedContext?: boolean | undefined;
  enableKvCacheReuse?: boolean | undefined;
  kvCacheEventBufferMaxSize?: number | undefined;  // KV cache events kept undrained; 0/absent: off
  maxAttentionWindowSize?: number | undefined;   // TensorRT-LLM's max_attention_window_size; absent: the model's windows
  maxBeamWidth?: number | undefined;
  speculativeNgram?: number | undefined;  // prompt-lookup speculation: guessed tokens per step; 0/absent: off
  draftModel?: string | undefined;        // speculation by draft model: its checkpoint directory
  medusaHeads?: string | undefined;       // speculation by Medusa heads: their directory
  medusaChoices?: string | undefined;     // the Medusa tree's paths of ranks, as JSON text (absent: the engine's default)
  eagleHeads?: string | undefined;        // speculation by EAGLE heads: their directory
  eagleChoices?: string | undefined;      // the EAGLE tree's paths of ranks, as JSON text (absent: a chain)
  numDraftTokens?: number | undefined;    // the draft model's guesses per step (absent: 4)
  speculativeMaxBatch?: number | undefined;  // speculation off above this many decoding requests (absent: 32)
  loraModules?: readonly string[] | undefined;  // preloaded LoRA adapters, "name=dir" (task ids 1, 2, ... in order)
  enableLora?: boolean | undefined;       // LoRA on without preloading (implied by loraModules)
  maxLoras?: number | undefined;          // adapters one batch may use; 0/absent: derived by the engine
  loraCacheOptimalAdapterSize?: number | undefined;  // the rank GPU slots are sized for (absent: 8)
  loraCacheMaxAdapterSize?: number | undefined;      // the largest rank accepted (absent: 64)
  loraCacheGpuMemoryFraction?: number | undefined;   // GPU memory the slots take (absent: 0.05)
  loraCacheHostMemoryBytes?: number | undefined;     // host cache of adapters (absent: 1 GiB)
  drainTimeoutMs: number;
  hangTimeoutMs?: number | undefined;  // leader mode: the liveness watch's bound (0: none)
  logLevel: LogLevel;
  tp?: number | undefined;       // leader mode: the grid started by mpirun (default 1 x 1)
  pp?: number | undefined;
  ep?: number | undefined;       // expert-parallel groups within tp (mixture-of-experts models)
  ppMicroBatches?: number | undefined;  // pipelined pp: micro-batches in flight (1: off; absent: one per stage)
  ppLayers?: string | undefined;        // layers per pipeline stage: 'balanced' or 'a,b,...' (absent: even)
  device?: 'auto' | 'cpu' | 'cuda' | undefined;   // default cpu
  loadFormat?: 'auto' | 'dummy' | undefined;
  quantization?: 'none' | 'fp8' | undefined;
  kvCacheDtype?: 'auto' | 'fp8' | undefined;
  gpuDeviceId?: number | undefined;               // this rank's GPU (its entry of --gpu-device-ids)
  kvCacheFreeGpuMemFraction?: number | undefined;
}
