// Every option of `serve` (and of the hidden `rank` command, `config print`, `slurm render|submit`), defined once:
// flag, TRTLLM_* env fallback, file key, check, default, help, how ranks get it and the executor setting it becomes
// (option-definition.ts says what each field means). Nothing else lists them: the launcher's commander options, the
// configuration file's schema, `config print`, the ranks' argv, job scripts and the executor's settings are derived
// from this table. The order is --help's, and within a file section the order `config print` shows.
import type { SchedulerPolicy } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { defaultModelDir } from '../common/package-root.js';
import { DEFAULT_MAX_LOGITS_BYTES_IN_FLIGHT, DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST } from '../frontend/logits-budget.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';
import { gpuOfLocalRank } from './device-ids.js';
import { LORA_MODULES_FLAG, loraModulesKind } from './lora-options.js';
import { medusaChoicesKind } from './medusa-choices.js';
import type { OptionDefinition } from './option-definition.js';
import {
  choiceKind, deviceIdsKind, fractionKind, INT32_MAX, intKind, portKind, ppLayersKind, switchKind, textKind, toggleKind,
} from './value-kinds.js';

export const LAUNCHER_KINDS = ['auto', 'mpirun', 'srun', 'none'] as const;
export const DEVICES = ['auto', 'cpu', 'cuda'] as const;
export const LOAD_FORMATS = ['auto', 'dummy'] as const;
export const QUANTIZATIONS = ['none', 'fp8'] as const;
export const KV_CACHE_DTYPES = ['auto', 'fp8'] as const;
export const ROUTERS = ['least-load', 'kv', 'round-robin'] as const;
export const SCHEDULER_POLICIES = ['max_utilization', 'guaranteed_no_evict'] as const satisfies readonly SchedulerPolicy[];

/** The serve options as commander parses them (flags over env; a configuration file fills in the rest, config/). */
export interface ServeCliOptions {
  model: string;
  servedModelName?: string;
  worldSize?: number;
  tp?: number;
  pp?: number;
  ep?: number;
  ppMicroBatches?: number;
  ppLayers?: string;
  moeTp?: number;
  dp?: number;
  router: (typeof ROUTERS)[number];
  isolateFailures: boolean;
  launcher: (typeof LAUNCHER_KINDS)[number];
  oversubscribe: boolean;
  hostfile?: string;
  hosts?: string;
  srunArgs?: string;
  startupTimeout: number;
  logDir?: string;
  dryRun: boolean;
  device: (typeof DEVICES)[number];
  gpuDeviceIds?: string;
  loadFormat: (typeof LOAD_FORMATS)[number];
  quantization: (typeof QUANTIZATIONS)[number];
  kvCacheDtype: (typeof KV_CACHE_DTYPES)[number];
  host: string;
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  apiKey?: string;
  authHealth: boolean;
  authMetrics: boolean;
  logLevel: LogLevel;
  threads?: number;
  maxBatchSize?: number;
  maxQueueSize?: number;
  maxNumTokens?: number;
  maxSeqLen?: number;
  tokensPerBlock?: number;
  maxTokensInPagedKvCache?: number;
  kvCacheFreeGpuMemFraction?: number;
  schedulerPolicy?: SchedulerPolicy;
  enableChunkedContext?: boolean;
  enableKvCacheReuse?: boolean;
  kvCacheEventBufferMaxSize?: number;
  maxAttentionWindowSize?: number;
  maxBeamWidth?: number;
  speculativeNgram?: number;
  draftModel?: string;
  medusaHeads?: string;
  medusaChoices?: string;
  eagleHeads?: string;
  eagleChoices?: string;
  numDraftTokens?: number;
  speculativeMaxBatch?: number;
  loraModules?: readonly string[];
  enableLora?: boolean;
  maxLoras?: number;
  loraCacheOptimalAdapterSize?: number;
  loraCacheMaxAdapterSize?: number;
  loraCacheGpuMemoryFraction?: number;
  loraCacheHostMemoryBytes?: number;
  maxBodyBytes: number;
  allowAnyContentType: boolean;
  maxLogitsBytesPerRequest: number;
  maxLogitsBytesInFlight: number;
  drainTimeout: number;
  hangTimeout: number;
}

type Serve = OptionDefinition<keyof ServeCliOptions>;

const TABLE = [
  // What to serve.
  { name: 'model', flag: '--model', placeholder: '<dir>', env: 'TRTLLM_MODEL', kind: textKind, defaultFrom: defaultModelDir,
    help: 'Hugging Face checkpoint directory', file: { key: 'model' }, rank: 'argv', job: 'rendered' },
  { name: 'servedModelName', flag: '--served-model-name', placeholder: '<name>', env: 'TRTLLM_SERVED_MODEL_NAME', kind: textKind,
    help: 'OpenAI model id (default: the checkpoint directory name)', file: { key: 'name', unset: 'the checkpoint directory\'s name' }, rank: 'argv' },

  // The grid and how it is started.
  { name: 'worldSize', flag: '--world-size', placeholder: '<n>', env: 'TRTLLM_WORLD_SIZE', kind: intKind(1),
    help: 'ranks = tp × pp (default 1; alone it means tp = world size)', job: 'rendered' },
  { name: 'tp', flag: '--tp', placeholder: '<n>', env: 'TRTLLM_TP', kind: intKind(1), help: 'tensor-parallel ranks',
    file: { key: 'parallel.tp', unset: 'world size / pp' }, rank: 'grid', job: 'rendered', executor: { field: 'tp', follower: true } },
  { name: 'pp', flag: '--pp', placeholder: '<n>', env: 'TRTLLM_PP', kind: intKind(1), help: 'pipeline-parallel stages',
    file: { key: 'parallel.pp', unset: 'world size / tp, else 1' }, rank: 'grid', job: 'rendered', executor: { field: 'pp', follower: true } },
  // Pipelined pp (native/engine/executor/executor-pipeline.cpp): 1 turns it off, for the same-run baseline of
  // bench/parallel-throughput.ts and for anyone who wants every request in one batch per iteration.
  { name: 'ppMicroBatches', flag: '--pp-micro-batches', placeholder: '<n>', env: 'TRTLLM_PP_MICRO_BATCHES', kind: intKind(1),
    help: 'with --pp > 1: micro-batches kept in flight, so each stage computes one while the next stage computes the one before (each up to --max-batch-size requests); 1: the stages run one after the other (default: one per stage; the CUDA backend keeps at most 2)',
    file: { key: 'parallel.pp_micro_batches', unset: 'one per pipeline stage' }, rank: 'argv', executor: { field: 'ppMicroBatches' } },
  { name: 'ppLayers', flag: '--pp-layers', placeholder: '<balanced|a,b,...>', env: 'TRTLLM_PP_LAYERS', kind: ppLayersKind,
    help: 'with --pp > 1: decoder layers per pipeline stage — balanced (the slowest stage made fastest, counting the LM head on the last one) or one count per stage, e.g. 20,12 (default: an even split, earlier stages taking the extra layer)',
    file: { key: 'parallel.pp_layers', unset: 'an even split' }, rank: 'argv', executor: { field: 'ppLayers', follower: true } },
  { name: 'ep', flag: '--ep', placeholder: '<n>', env: 'TRTLLM_EP', kind: intKind(1),
    help: 'mixture-of-experts models: split the experts over n groups of the tp ranks (TensorRT-LLM\'s moe_ep_size; tp = moe_tp × ep)',
    file: { key: 'parallel.ep', unset: 'tp / moe_tp, else 1' }, rank: 'argv', executor: { field: 'ep', follower: true } },
  { name: 'moeTp', flag: '--moe-tp', placeholder: '<n>', env: 'TRTLLM_MOE_TP', kind: intKind(1),
    help: 'mixture-of-experts models: ranks that split each expert\'s intermediate columns (TensorRT-LLM\'s moe_tp_size; default tp / ep)',
    file: { key: 'parallel.moe_tp', unset: 'tp / ep' } },
  // Data parallelism: dp replicas of the model, each tp × pp ranks, behind one endpoint (orchestrator mode underneath:
  // launcher/multi-model/data-parallel.ts, worker/orchestrator/replica-set.ts).
  { name: 'dp', flag: '--dp', placeholder: '<n>', env: 'TRTLLM_DP', kind: intKind(1),
    help: 'data-parallel replicas of the model, each tp × pp ranks, behind one endpoint (world size = dp × tp × pp; default 1)',
    file: { key: 'parallel.dp', unset: '1' } },
  { name: 'router', flag: '--router', placeholder: '<kind>', env: 'TRTLLM_ROUTER', kind: choiceKind(ROUTERS), default: 'least-load',
    help: '--dp: least-load (fewest outstanding requests) | kv (longest cached prefix of the prompt, then load; needs --enable-kv-cache-reuse) | round-robin (each live replica in turn)',
    file: { key: 'parallel.router', unset: 'least-load' } },
  { name: 'isolateFailures', flag: '--isolate-failures', env: 'TRTLLM_ISOLATE_FAILURES', kind: switchKind, default: false,
    help: '--dp: a replica that dies is dropped (its requests fail naming it) and the others keep serving, instead of stopping the cluster' },
  { name: 'launcher', flag: '--launcher', placeholder: '<kind>', env: 'TRTLLM_LAUNCHER', kind: choiceKind(LAUNCHER_KINDS), default: 'auto',
    help: 'auto | mpirun | srun | none (auto: srun inside a Slurm allocation, else mpirun when world size > 1)' },
  { name: 'oversubscribe', flag: '--oversubscribe', env: 'TRTLLM_OVERSUBSCRIBE', kind: switchKind, default: false,
    help: 'allow more ranks than cores (CPU clusters on one machine)' },
  { name: 'hostfile', flag: '--hostfile', placeholder: '<file>', env: 'TRTLLM_HOSTFILE', kind: textKind, path: true,
    help: 'mpirun hostfile for multi-node clusters' },
  { name: 'hosts', flag: '--hosts', placeholder: '<list>', env: 'TRTLLM_HOSTS', kind: textKind,
    help: 'comma-separated hosts (host:slots) for mpirun' },
  { name: 'srunArgs', flag: '--srun-args', placeholder: '<args>', env: 'TRTLLM_SRUN_ARGS', kind: textKind, job: 'rendered',
    help: 'extra srun arguments for the rank step under Slurm, e.g. "--container-image=img --container-mounts=/data:/data"' },
  { name: 'startupTimeout', flag: '--startup-timeout', placeholder: '<seconds>', env: 'TRTLLM_STARTUP_TIMEOUT', kind: intKind(1), default: 300,
    help: 'give up when the leader is not ready by then' },
  { name: 'logDir', flag: '--log-dir', placeholder: '<dir>', env: 'TRTLLM_LOG_DIR', kind: textKind, job: 'rendered',
    help: 'also write each rank\'s output to <dir>/rank-N.log' },
  { name: 'dryRun', flag: '--dry-run', env: 'TRTLLM_DRY_RUN', kind: switchKind, default: false, job: 'never',
    help: 'print the mpirun command and each rank\'s role, then exit' },

  // The device.
  { name: 'device', flag: '--device', placeholder: '<kind>', env: 'TRTLLM_DEVICE', kind: choiceKind(DEVICES), default: 'auto',
    help: 'auto | cpu | cuda (auto: cuda when the addon has the CUDA backend and a GPU is visible)', rank: 'argv',
    executor: { field: 'device', follower: true } },
  { name: 'gpuDeviceIds', flag: '--gpu-device-ids', placeholder: '<ids>', env: 'TRTLLM_GPU_DEVICE_IDS', kind: deviceIdsKind,
    help: 'GPU of each rank on a host, by local rank: "0,1" (default: local rank)',
    file: { key: 'gpu_device_ids', unset: 'local rank (CUDA backend)', cpuIgnores: 'ranks run on CPU cores' }, rank: 'argv',
    served: (text: string, localRank) => ({ gpuDeviceId: gpuOf(text, localRank) }),
    executor: { field: 'gpuDeviceId', follower: true, from: 'gpuDeviceId' } },
  { name: 'loadFormat', flag: '--load-format', placeholder: '<format>', env: 'TRTLLM_LOAD_FORMAT', kind: choiceKind(LOAD_FORMATS), default: 'auto',
    help: 'auto | dummy (random weights of config.json\'s shapes, for benchmarks)', rank: 'argv', executor: { field: 'loadFormat', follower: true } },
  { name: 'quantization', flag: '--quantization', placeholder: '<method>', env: 'TRTLLM_QUANTIZATION', kind: choiceKind(QUANTIZATIONS), default: 'none',
    help: 'none | fp8 (a 16-bit checkpoint\'s projections quantized to FP8 per output channel at load; FP8 checkpoints need no flag)',
    file: { key: 'quantization', unset: 'none (FP8 checkpoints load as FP8 anyway)' }, rank: 'argv',
    executor: { field: 'quantization', follower: true } },
  { name: 'kvCacheDtype', flag: '--kv-cache-dtype', placeholder: '<dtype>', env: 'TRTLLM_KV_CACHE_DTYPE', kind: choiceKind(KV_CACHE_DTYPES), default: 'auto',
    help: 'auto (the model\'s precision, FP8 where the checkpoint says its KV cache is) | fp8 (K/V stored as e4m3 with per-layer scales: twice the tokens in the same memory; CPU backend)',
    file: { key: 'kv_cache.dtype', unset: 'auto' }, rank: 'argv', executor: { field: 'kvCacheDtype', follower: true } },

  // The frontend.
  { name: 'host', flag: '--host', placeholder: '<addr>', env: 'TRTLLM_HOST', kind: textKind, default: '0.0.0.0',
    help: 'address to listen on', file: { key: 'serving.host' }, rank: 'argv' },
  { name: 'httpPort', flag: '--http-port', placeholder: '<port>', env: 'TRTLLM_HTTP_PORT', kind: portKind, default: 8000,
    help: 'KServe v2 + OpenAI HTTP port', file: { key: 'serving.http_port' }, rank: 'argv' },
  { name: 'grpcPort', flag: '--grpc-port', placeholder: '<port>', env: 'TRTLLM_GRPC_PORT', kind: portKind, default: 8001,
    help: 'KServe v2 gRPC port (Triton\'s GRPCInferenceService)', file: { key: 'serving.grpc_port' }, rank: 'argv' },
  { name: 'metricsPort', flag: '--metrics-port', placeholder: '<port>', env: 'TRTLLM_METRICS_PORT', kind: portKind, default: 8002,
    help: 'Prometheus metrics port', file: { key: 'serving.metrics_port' }, rank: 'argv' },
  { name: 'apiKey', flag: '--api-key', placeholder: '<key>', env: 'TRTLLM_API_KEY', kind: textKind, secret: true, rank: 'env', job: 'never',
    help: 'require "Authorization: Bearer <key>" on the API' },
  { name: 'authHealth', flag: '--auth-health', env: 'TRTLLM_AUTH_HEALTH', kind: switchKind, default: false, rank: 'argv',
    help: 'health endpoints need the API key too' },
  { name: 'authMetrics', flag: '--auth-metrics', env: 'TRTLLM_AUTH_METRICS', kind: switchKind, default: false, rank: 'argv',
    help: '/metrics needs the API key too' },
  { name: 'logLevel', flag: '--log-level', placeholder: '<level>', env: 'TRTLLM_LOG_LEVEL', kind: choiceKind(LOG_LEVELS), default: 'info',
    help: LOG_LEVELS.join(' | '), rank: 'argv' },

  // The executor.
  { name: 'threads', flag: '--threads', placeholder: '<n>', env: 'TRTLLM_THREADS', kind: intKind(1),
    help: 'compute threads; beside a GPU, the threads of its host work (guided masks, host sampling) (default: all cores)', rank: 'argv', executor: { field: 'numThreads', follower: true } },
  { name: 'maxBatchSize', flag: '--max-batch-size', placeholder: '<n>', env: 'TRTLLM_MAX_BATCH_SIZE', kind: intKind(1),
    help: 'requests per iteration (default 64)', file: { key: 'batching.max_batch_size', unset: '64' }, rank: 'argv',
    executor: { field: 'maxBatchSize', follower: true } },
  { name: 'maxQueueSize', flag: '--max-queue-size', placeholder: '<n>', env: 'TRTLLM_MAX_QUEUE_SIZE', kind: intKind(0),
    help: 'queued requests before 503 (default: unbounded)', file: { key: 'serving.max_queue_size', unset: '0 = unbounded' }, rank: 'argv',
    executor: { field: 'maxQueueSize' } },
  { name: 'maxNumTokens', flag: '--max-num-tokens', placeholder: '<n>', env: 'TRTLLM_MAX_NUM_TOKENS', kind: intKind(1),
    help: 'tokens per iteration (default 8192)', file: { key: 'batching.max_num_tokens', unset: '8192' }, rank: 'argv',
    executor: { field: 'maxNumTokens', follower: true } },
  { name: 'maxSeqLen', flag: '--max-seq-len', placeholder: '<n>', env: 'TRTLLM_MAX_SEQ_LEN', kind: intKind(1),
    help: 'prompt + output tokens (default: the model\'s)', rank: 'argv', executor: { field: 'maxSeqLen' } },
  { name: 'tokensPerBlock', flag: '--tokens-per-block', placeholder: '<n>', env: 'TRTLLM_TOKENS_PER_BLOCK', kind: intKind(1),
    help: 'paged KV block size (default 64)', file: { key: 'kv_cache.tokens_per_block', unset: '64' }, rank: 'argv',
    executor: { field: 'tokensPerBlock' } },
  { name: 'maxTokensInPagedKvCache', flag: '--max-tokens-in-paged-kv-cache', placeholder: '<n>', env: 'TRTLLM_MAX_TOKENS_IN_PAGED_KV_CACHE',
    kind: intKind(1), help: 'KV cache capacity in tokens',
    file: { key: 'kv_cache.max_tokens', unset: 'room for max_batch_size x max_seq_len' }, rank: 'argv', executor: { field: 'maxTokensInPagedKvCache' } },
  { name: 'kvCacheFreeGpuMemFraction', flag: '--kv-cache-free-gpu-mem-fraction', placeholder: '<x>', env: 'TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION',
    kind: fractionKind, help: 'GPU: share of the free memory after loading the KV cache takes (default 0.9)',
    file: { key: 'kv_cache.free_mem_fraction', unset: '0.9 (CUDA backend)', cpuIgnores: 'KV capacity comes from kv_cache.max_tokens' }, rank: 'argv',
    executor: { field: 'kvCacheFreeGpuMemFraction' } },
  { name: 'schedulerPolicy', flag: '--scheduler-policy', placeholder: '<policy>', env: 'TRTLLM_SCHEDULER_POLICY', kind: choiceKind(SCHEDULER_POLICIES),
    help: 'max_utilization | guaranteed_no_evict', file: { key: 'batching.scheduler_policy', unset: 'guaranteed_no_evict' }, rank: 'argv',
    executor: { field: 'schedulerPolicy' } },
  { name: 'enableChunkedContext', flag: '--enable-chunked-context', env: 'TRTLLM_ENABLE_CHUNKED_CONTEXT', kind: toggleKind,
    help: 'split prompts longer than an iteration\'s room into chunks (default off)', file: { key: 'batching.enable_chunked_context', unset: 'false' },
    rank: 'argv', executor: { field: 'enableChunkedContext' } },
  { name: 'enableKvCacheReuse', flag: '--enable-kv-cache-reuse', env: 'TRTLLM_ENABLE_KV_CACHE_REUSE', kind: toggleKind,
    help: 'reuse cached KV blocks of shared prompt prefixes (default off)', file: { key: 'kv_cache.enable_reuse', unset: 'false' },
    rank: 'argv', executor: { field: 'enableKvCacheReuse' } },
  // TensorRT-LLM's KvCacheConfig.event_buffer_max_size: what a KV-aware router drains from POST /kv_cache_events
  // (worker/frontend/kv-cache-events.ts). Needs --enable-kv-cache-reuse (kvCacheEventsProblem below).
  { name: 'kvCacheEventBufferMaxSize', flag: '--kv-cache-event-buffer-max-size', placeholder: '<n>', env: 'TRTLLM_KV_CACHE_EVENT_BUFFER_MAX_SIZE',
    kind: intKind(0, INT32_MAX),
    help: 'record KV cache events (blocks stored in and removed from the prefix cache) for POST /kv_cache_events, keeping at most n undrained (the oldest dropped past it); needs --enable-kv-cache-reuse (default 0: off)',
    file: { key: 'kv_cache.event_buffer_max_size', unset: '0 = off' }, rank: 'argv', executor: { field: 'kvCacheEventBufferMaxSize' } },
  // TensorRT-LLM's max_attention_window_size (the seeds' config.pbtxt parameter); a request's own
  // max_attention_window_size may ask for less (worker/frontend/attention-window.ts), never more.
  { name: 'maxAttentionWindowSize', flag: '--max-attention-window-size', placeholder: '<n>', env: 'TRTLLM_MAX_ATTENTION_WINDOW_SIZE',
    kind: intKind(1, INT32_MAX),
    help: 'every layer attends over at most the last n positions (the smaller of n and a layer\'s own sliding window); with every layer windowed, KV blocks that leave the window go back to the pool (default: the model\'s own windows)',
    file: { key: 'kv_cache.max_attention_window_size', unset: 'the model\'s own windows' }, rank: 'argv',
    executor: { field: 'maxAttentionWindow' } },
  { name: 'maxBeamWidth', flag: '--max-beam-width', placeholder: '<n>', env: 'TRTLLM_MAX_BEAM_WIDTH', kind: intKind(1),
    help: 'largest beam width a request may ask for (default 1)', file: { key: 'decoding.max_beam_width', unset: '1' }, rank: 'argv',
    executor: { field: 'maxBeamWidth' } },
  // Speculative decoding by prompt lookup (native/engine/executor/executor-speculation.cpp): exact; a request's
  // num_draft_tokens overrides it (worker/frontend/draft-tokens.ts).
  { name: 'speculativeNgram', flag: '--speculative-ngram', placeholder: '<n>', env: 'TRTLLM_SPECULATIVE_NGRAM', kind: intKind(0, 64),
    help: 'speculative decoding by prompt lookup: up to n tokens guessed from a request\'s own earlier text are checked in the pass that computes its next token, and the ones the model\'s draws agree with are kept (the output is unchanged; a request\'s num_draft_tokens overrides n; default 0: off)',
    file: { key: 'decoding.speculative_ngram', unset: '0 = off' }, rank: 'argv', executor: { field: 'ngramDraftTokens' } },
  // Speculative decoding by draft model (native/engine/executor/executor-draft-model.cpp), on the leading rank.
  { name: 'draftModel', flag: '--draft-model', placeholder: '<dir>', env: 'TRTLLM_DRAFT_MODEL', kind: textKind,
    help: 'speculative decoding by draft model: a smaller Hugging Face checkpoint over the same tokenizer guesses the next tokens, checked in the pass that computes the model\'s next token (the output is unchanged; runs on the leading rank, with the model\'s device and dtype)',
    file: { key: 'decoding.draft_model', unset: 'none' }, rank: 'argv', executor: { field: 'draftModel' } },
  // Speculative decoding by Medusa heads (native/engine/medusa/), run by the model on the leading rank.
  { name: 'medusaHeads', flag: '--medusa-heads', placeholder: '<dir>', env: 'TRTLLM_MEDUSA_HEADS', kind: textKind,
    help: 'speculative decoding by Medusa heads: a directory in the Medusa layout (config.json with medusa_num_heads, medusa_lm_head.safetensors) trained for this model; head k guesses the token k + 2 ahead, checked in the pass that computes the next token (the output is unchanged; CPU and CUDA backends; under pp the last stage runs them, with --pp-micro-batches 1)',
    file: { key: 'decoding.medusa_heads', unset: 'none' }, rank: 'argv', executor: { field: 'medusaHeads', follower: true } },
  { name: 'medusaChoices', flag: '--medusa-choices', placeholder: '<json>', env: 'TRTLLM_MEDUSA_CHOICES', kind: medusaChoicesKind,
    help: 'the candidates a Medusa step checks, as TensorRT-LLM\'s medusa_choices: paths of ranks ([[0], [0, 0], [1]]: head 0\'s first choice, then head 1\'s first after it, and head 0\'s second), each after its parent; the first --num-draft-tokens of them are checked as one tree (default: every path whose ranks sum to 2 at most, likeliest first)',
    file: { key: 'decoding.medusa_choices', unset: 'ranks summing to 2 at most' }, rank: 'argv', executor: { field: 'medusaChoices' } },
  // Speculative decoding by EAGLE heads (native/engine/eagle/): a one-layer draft on the leading rank that reads the
  // model's final hidden states (CPU backend; tp, not pp).
  { name: 'eagleHeads', flag: '--eagle-heads', placeholder: '<dir>', env: 'TRTLLM_EAGLE_HEADS', kind: textKind,
    help: 'speculative decoding by EAGLE heads: a directory in the EAGLE-1/2 layout (a one-layer LlamaConfig config.json, model.safetensors with fc.weight and layers.0.*) trained for this model; beside each token it reads the model\'s final hidden state and guesses --num-draft-tokens tokens one after the other, checked in the pass that computes the next token (the output is unchanged; CPU backend, tp on the leading rank, not pp)',
    file: { key: 'decoding.eagle_heads', unset: 'none' }, rank: 'argv', executor: { field: 'eagleHeads' } },
  { name: 'eagleChoices', flag: '--eagle-choices', placeholder: '<json>', env: 'TRTLLM_EAGLE_CHOICES', kind: medusaChoicesKind,
    help: 'the tree of guesses an EAGLE step checks, as TensorRT-LLM\'s eagle_choices and in --medusa-choices\' form: paths of ranks ([[0], [0, 0], [1]]: the draft\'s first guess, its first guess after that one, and its second guess), each after its parent; the draft grows the tree depth by depth and the first --num-draft-tokens paths are checked in one pass (default: a chain of --num-draft-tokens guesses)',
    file: { key: 'decoding.eagle_choices', unset: 'a chain' }, rank: 'argv', executor: { field: 'eagleChoices' } },
  { name: 'numDraftTokens', flag: '--num-draft-tokens', placeholder: '<n>', env: 'TRTLLM_NUM_DRAFT_TOKENS', kind: intKind(1, 64),
    help: 'tokens the draft model or EAGLE heads guess a step, or candidates the Medusa heads propose (default 4; a request\'s num_draft_tokens overrides it)',
    file: { key: 'decoding.num_draft_tokens', unset: '4' }, rank: 'argv', executor: { field: 'draftModelTokens' } },
  { name: 'speculativeMaxBatch', flag: '--speculative-max-batch', placeholder: '<n>', env: 'TRTLLM_SPECULATIVE_MAX_BATCH', kind: intKind(0),
    help: 'speculation (prompt lookup, draft model, Medusa or EAGLE heads) is off in an iteration with more than n requests decoding, where checking guesses costs more than it saves (default 32; 0: no limit)',
    file: { key: 'decoding.speculative_max_batch', unset: '32' }, rank: 'argv', executor: { field: 'speculationMaxBatch' } },

  // LoRA adapters (native/engine/lora/; TensorRT-LLM's PEFT cache, sized by the backend's lora_cache_* parameters):
  // preloaded ones named by --lora-modules (worker/options/lora-options.ts), others sent with a KServe request
  // (worker/frontend/kserve-lora.ts). How they go together: lora-options.ts's loraProblem.
  { name: 'loraModules', flag: LORA_MODULES_FLAG, placeholder: '<name=dir...>', env: 'TRTLLM_LORA_MODULES', kind: loraModulesKind,
    help: 'LoRA adapters read at startup: Hugging Face PEFT directories, each under a name that an OpenAI request\'s "model" picks; KServe requests name them by lora_task_id 1, 2, ... in the order given (implies --enable-lora)',
    file: { key: 'lora.modules', unset: 'none' }, rank: 'argv', executor: { field: 'loraModules' } },
  { name: 'enableLora', flag: '--enable-lora', env: 'TRTLLM_ENABLE_LORA', kind: toggleKind,
    help: 'serve LoRA adapters: a KServe request may bring its own (lora_weights + lora_config, cached under its lora_task_id) besides naming those of --lora-modules (default off, on with --lora-modules)',
    file: { key: 'lora.enable', unset: 'false (true with lora.modules)' }, rank: 'argv', executor: { field: 'enableLora' } },
  { name: 'maxLoras', flag: '--max-loras', placeholder: '<n>', env: 'TRTLLM_MAX_LORAS', kind: intKind(0, INT32_MAX),
    help: 'LoRA adapters one batch may use (default 0: as many as --lora-cache-gpu-memory-fraction holds at the optimal adapter size on a GPU, --max-batch-size on the CPU)',
    file: { key: 'lora.max_loras', unset: '0 = derived' }, rank: 'argv', executor: { field: 'maxLoras' } },
  { name: 'loraCacheOptimalAdapterSize', flag: '--lora-cache-optimal-adapter-size', placeholder: '<n>', env: 'TRTLLM_LORA_CACHE_OPTIMAL_ADAPTER_SIZE',
    kind: intKind(1, INT32_MAX), help: 'the LoRA rank the adapter slots on a GPU are sized for (default 8)',
    file: { key: 'lora.cache_optimal_adapter_size', unset: '8' }, rank: 'argv', executor: { field: 'loraCacheOptimalAdapterSize' } },
  { name: 'loraCacheMaxAdapterSize', flag: '--lora-cache-max-adapter-size', placeholder: '<n>', env: 'TRTLLM_LORA_CACHE_MAX_ADAPTER_SIZE',
    kind: intKind(1, INT32_MAX), help: 'the largest LoRA rank an adapter may have (default 64)',
    file: { key: 'lora.cache_max_adapter_size', unset: '64' }, rank: 'argv', executor: { field: 'loraCacheMaxAdapterSize' } },
  { name: 'loraCacheGpuMemoryFraction', flag: '--lora-cache-gpu-memory-fraction', placeholder: '<x>', env: 'TRTLLM_LORA_CACHE_GPU_MEMORY_FRACTION',
    kind: fractionKind, help: 'GPU: share of the memory free after loading that the LoRA adapter slots take (default 0.05)',
    file: { key: 'lora.cache_gpu_memory_fraction', unset: '0.05 (CUDA backend)', cpuIgnores: 'adapters stay in host memory' }, rank: 'argv',
    executor: { field: 'loraCacheGpuMemoryFraction' } },
  { name: 'loraCacheHostMemoryBytes', flag: '--lora-cache-host-memory-bytes', placeholder: '<n>', env: 'TRTLLM_LORA_CACHE_HOST_MEMORY_BYTES',
    kind: intKind(1), help: 'host memory for LoRA adapters kept between requests, the least recently used dropped past it (default 1 GiB)',
    file: { key: 'lora.cache_host_memory_bytes', unset: '1073741824 (1 GiB)' }, rank: 'argv', executor: { field: 'loraCacheHostMemoryBytes' } },

  // Requests and shutdown.
  { name: 'maxBodyBytes', flag: '--max-body-bytes', placeholder: '<n>', env: 'TRTLLM_MAX_BODY_BYTES', kind: intKind(1), default: 8 * 1024 * 1024,
    help: 'largest request body accepted', rank: 'argv' },
  // The JSON endpoints' guard against cross-site requests from browsers (worker/frontend/content-type.ts says which
  // Content-Types are read); this turns it off, reading every body as JSON.
  { name: 'allowAnyContentType', flag: '--allow-any-content-type', env: 'TRTLLM_ALLOW_ANY_CONTENT_TYPE', kind: switchKind, default: false,
    help: 'read every request body as JSON, whatever its Content-Type (default: JSON; untyped and curl -d\'s form type unless a browser sent them; others 415)',
    rank: 'argv' },
  // Logits (return_context_logits, return_generation_logits) are held whole until they are answered; what a request
  // will take is known before it runs, so it is refused then (worker/frontend/logits-budget.ts).
  { name: 'maxLogitsBytesPerRequest', flag: '--max-logits-bytes-per-request', placeholder: '<n>', env: 'TRTLLM_MAX_LOGITS_BYTES_PER_REQUEST',
    kind: intKind(0), default: DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST, rank: 'argv',
    help: 'largest logits one request may ask for, in bytes (prompt x vocab x 4 for context logits, max tokens x beams x vocab x 4 for generation logits, summed over its sequences): 400 above it (0: no limit)' },
  { name: 'maxLogitsBytesInFlight', flag: '--max-logits-bytes-in-flight', placeholder: '<n>', env: 'TRTLLM_MAX_LOGITS_BYTES_IN_FLIGHT',
    kind: intKind(0), default: DEFAULT_MAX_LOGITS_BYTES_IN_FLIGHT, rank: 'argv',
    help: 'logits bytes the requests in flight may hold together: 503 (retry later) for a request that would go past it (0: no limit)' },
  { name: 'drainTimeout', flag: '--drain-timeout', placeholder: '<seconds>', env: 'TRTLLM_DRAIN_TIMEOUT', kind: intKind(0), default: 30,
    help: 'on SIGINT/SIGTERM, how long in-flight requests may finish', rank: 'argv',
    served: (seconds: number) => ({ drainTimeoutMs: seconds * 1000 }) },
  // Every rank's wait for another one is bounded by it (native/engine/comm/liveness.h): at half of it the leader says
  // it stalled and answers /v2/health/ready with 503, at all of it the gang ends with a root cause naming the rank
  // that made no progress. It must exceed the longest single step of one rank (a prefill of max_num_tokens).
  { name: 'hangTimeout', flag: '--hang-timeout', placeholder: '<seconds>', env: 'TRTLLM_HANG_TIMEOUT', kind: intKind(0), default: 30,
    help: 'a rank that makes no progress for this long fails the cluster, named in the root cause (0: never)',
    file: { key: 'serving.hang_timeout' }, rank: 'argv',
    served: (seconds: number) => ({ hangTimeoutMs: seconds * 1000 }),
    executor: { field: 'hangTimeoutMs', follower: true, from: 'hangTimeoutMs' } },
] as const satisfies readonly Serve[];

export const SERVE_OPTIONS: readonly Serve[] = TABLE;

/** KV cache events exist only with prefix reuse (as in TensorRT-LLM): what is wrong when they are asked for without
 * it, naming both options; undefined when the two agree. Checked before any rank starts and by the rank itself. */
export function kvCacheEventsProblem(o: { kvCacheEventBufferMaxSize?: number | undefined; enableKvCacheReuse?: boolean | undefined }): string | undefined {
  if ((o.kvCacheEventBufferMaxSize ?? 0) > 0 && o.enableKvCacheReuse !== true) {
    return `--kv-cache-event-buffer-max-size ${o.kvCacheEventBufferMaxSize} needs --enable-kv-cache-reuse: KV cache events report the prefix cache, which is off`;
  }
  return undefined;
}

/** A rank's GPU from the list it was given; a bad list or a short one is the user's mistake, named. */
function gpuOf(text: string, localRank: number): number {
  const gpu = gpuOfLocalRank(text, localRank);
  if (!gpu.ok) throw new TrtllmError(gpu.message, 'invalid_argument');
  return gpu.value;
}

/** Where the configuration file comes from; not serve options themselves (ranks get the resolved values as flags). */
export interface ConfigSourceOptions {
  config?: string;
  modelRepo?: string;
}

export const CONFIG_SOURCE_OPTIONS: readonly OptionDefinition<keyof ConfigSourceOptions>[] = [
  { name: 'config', flag: '--config', placeholder: '<file>', env: 'TRTLLM_CONFIG', kind: textKind, path: true,
    help: 'YAML configuration file; flags and env override it' },
  { name: 'modelRepo', flag: '--model-repo', placeholder: '<dir>', env: 'TRTLLM_MODEL_REPO', kind: textKind, path: true,
    help: 'directory of YAML model files; one file = --config <that file>' },
];

/** Orchestrator mode (Triton's --multi-model): one orchestrator serving every model of --model-repo. */
export interface MultiModelOptions {
  multiModel?: boolean;
  spawn: boolean;      // commander's --no-spawn sets false
  failFast: boolean;
}

export const MULTI_MODEL_OPTIONS: readonly OptionDefinition<keyof MultiModelOptions>[] = [
  { name: 'multiModel', flag: '--multi-model', env: 'TRTLLM_MULTI_MODEL', kind: switchKind, default: false,
    help: 'serve every model file of --model-repo, each on its own worker group (orchestrator mode)' },
  { name: 'spawn', flag: '--no-spawn', kind: switchKind,
    help: 'orchestrator mode (--multi-model, --dp) without MPI_Comm_spawn: start every rank up front (Slurm); ranks from participant_ids' },
  { name: 'failFast', flag: '--fail-fast', env: 'TRTLLM_FAIL_FAST', kind: switchKind, default: false,
    help: 'orchestrator mode: one model\'s failure stops the whole cluster' },
];

// Every ServeCliOptions field has a definition (a field without one would never be parsed, forwarded or shown).
type Defined = (typeof TABLE)[number]['name'];
const everyFieldDefined: [Exclude<keyof ServeCliOptions, Defined>] extends [never] ? true : never = true;
void everyFieldDefined;
