// The whole native surface, typed in one place. native/addon/addon.cpp exports exactly these names
// (test/worker/binding/addon-types.test.ts checks it); nothing outside worker/binding touches the addon.

export type SchedulerPolicy = 'max_utilization' | 'guaranteed_no_evict';
export type FinishReason = 'not_finished' | 'end_id' | 'stop_words' | 'length' | 'timed_out' | 'cancelled';
export type NativeErrorCode =
  | 'invalid_argument' | 'not_found' | 'bad_checkpoint' | 'unsupported' | 'queue_full' | 'shutdown' | 'internal';

export interface SamplingParams {
  beamWidth?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  repetitionPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  minTokens?: number;
  lengthPenalty?: number;
  earlyStopping?: number;
  beamSearchDiversityRate?: number;
}

export interface OutputParams {
  returnLogProbs?: boolean;
  returnContextLogits?: boolean;
  returnGenerationLogits?: boolean;
  excludeInputFromOutput?: boolean;
}

/** TensorRT-LLM's GuidedDecodingParams: the output is constrained to a grammar (native/engine/grammar). 'json': any
 * JSON value (guide absent); 'json_schema': a JSON Schema (guide: its text); 'regex': a regular expression matched
 * by the whole output; 'ebnf_grammar': a GBNF grammar whose start rule is `root`. */
export type GuideType = 'json' | 'json_schema' | 'regex' | 'ebnf_grammar';
export interface GuidedDecodingParams {
  guideType: GuideType;
  guide?: string;
}

/** TensorRT-LLM's LoraConfig of a request: it runs with the adapter cached under taskId (the seeds' lora_task_id).
 * With weights and config (the seeds' lora_weights / lora_config, in TensorRT-LLM's layout; native/engine/lora/
 * lora-tensors.h) the adapter is cached under that id first, replacing what it held; without them the id must name
 * a cached or preloaded adapter. Needs the executor's lora.enabled. */
export interface LoraRequest {
  taskId: number;                    // a safe integer >= 0 (the engine's id is 64-bit; past 2^53 cannot be named here)
  weights?: Float32Array;            // [rows, cols]: row i holds module i's A ([r, in]) then its B ([out, r]), padded
  weightsShape?: [number, number];   // [rows, cols]
  config?: Int32Array;               // [rows, 3]: (module_id, layer_idx, adapter_size r) per row
  configShape?: [number, number];    // [rows, 3]
}

/** TensorRT-LLM's PromptTuningConfig (p-tuning; the seeds' prompt_embedding_table): inputTokenIds vocabSize + i
 * embed as row i of the table instead of a vocabulary row ("virtual tokens"). Needs a model whose backend embeds
 * them (the CPU one today); the prefix cache keeps each table's blocks apart. */
export interface PromptTuning {
  embeddingTable: Float32Array;      // [rows, hidden], rows being the prompt_vocab_size
  shape: [number, number];           // [rows, hidden]; hidden must be the model's hiddenSize
}

export interface NativeRequest {
  inputTokenIds: number[];
  maxTokens: number;
  streaming?: boolean;
  endId?: number;
  padId?: number;
  stopWords?: number[][];
  badWords?: number[][];
  clientId?: number;
  embeddingBias?: number[] | Float32Array;  // [vocabSize], added to every logits row; absent/empty: none
  numReturnSequences?: number;              // beams returned (best first); 0/absent: beamWidth
  /** max_attention_window_size of this request: every layer attends over at most the last this many positions, no
   * wider than the executor's maxAttentionWindow when that is set; 0/absent: the executor's. */
  maxAttentionWindow?: number;
  /** Speculative decoding: at most this many guessed tokens a step (the seeds' num_draft_tokens), 0..64; 0: none;
   * absent: the executor's (ngramDraftTokens, or draftModelTokens with a draft model). */
  numDraftTokens?: number;
  sampling?: SamplingParams;
  output?: OutputParams;
  /** Constrained decoding; needs the executor's guidedDecoding vocabulary. */
  guidedDecoding?: GuidedDecodingParams;
  /** The LoRA adapter it runs with; absent: the base model. */
  lora?: LoraRequest;
  /** P-tuning: the table the prompt's virtual tokens embed from; absent: every id is below vocabSize. */
  promptTuning?: PromptTuning;
}

export interface NativeResponse {
  requestId: number;
  clientId?: number;
  error?: { code: NativeErrorCode; message: string };
  isFinal: boolean;
  outputTokenIds?: number[][];          // per beam
  finishReasons?: FinishReason[];       // per beam
  cumLogProbs?: number[];               // per beam
  logProbs?: number[][];                // per beam, per returned token
  contextLogits?: Float32Array;         // [promptLen, vocabSize]
  generationLogits?: Float32Array;      // [beams, tokens, vocabSize]
  vocabSize?: number;
  timings?: { arrival: number; firstScheduled: number; firstToken: number; lastToken: number };  // seconds
}

export interface NativeExecutorConfig {
  maxBeamWidth?: number;
  /** Speculative decoding by prompt lookup: up to this many guessed tokens per decode step; 0/absent: off. */
  ngramDraftTokens?: number;
  /** Speculative decoding by draft model (NativeLoadOptions.draftModel): guesses per decode step, 1..64; default 4. */
  draftModelTokens?: number;
  /** Speculative decoding by Medusa heads (NativeLoadOptions.medusaHeads): the candidates a step checks, as paths of
   * ranks (TensorRT-LLM's medusa_choices); absent: the engine's default (ranks summing to 2 at most). */
  medusaChoices?: number[][];
  /** Speculative decoding by EAGLE heads (NativeLoadOptions.eagleHeads): the tree of guesses a step checks, as the same
   * paths of ranks (TensorRT-LLM's eagle_choices); absent: a chain of draftModelTokens guesses. */
  eagleChoices?: number[][];
  /** Speculation is off in an iteration with more requests decoding than this (0: no limit); default 32. */
  speculationMaxBatch?: number;
  maxBatchSize?: number;
  maxNumTokens?: number;
  maxQueueSize?: number;
  maxSeqLen?: number;
  schedulerPolicy?: SchedulerPolicy;
  tokensPerBlock?: number;
  maxTokensInPagedKvCache?: number;
  kvCacheMemoryBytes?: number;
  enableChunkedContext?: boolean;
  enableKvCacheReuse?: boolean;
  /** KV cache events (TensorRT-LLM's KvCacheConfig.event_buffer_max_size): at most this many undrained events are
   * kept, the oldest dropped past it; 0/absent: none. Recorded only with enableKvCacheReuse. */
  kvCacheEventBufferMaxSize?: number;
  /** TensorRT-LLM's max_attention_window_size: every layer attends over at most the last this many positions (the
   * smaller of it and a layer's own sliding window); with every layer windowed, KV blocks leaving the window go back
   * to the pool. 0/absent: the model's own windows. */
  maxAttentionWindow?: number;
  iterStatsMaxIterations?: number;
  maxLogitsElements?: number;   // cap on context/generation logits values per request; 0: none (default 2^28)
  /** Pipeline parallelism: micro-batches kept in flight (stages overlap); 1: stages one after the other. 0/absent:
   * one per stage. */
  ppMicroBatches?: number;
  /** Device backends: the KV pool takes this fraction of the GPU memory free after loading (default 0.9). */
  kvCacheFreeGpuMemFraction?: number;
  /** TensorRT-LLM's GuidedDecodingConfig: what each token id stands for as bytes (token i is
   * tokenBytes[tokenOffsets[i] .. tokenOffsets[i + 1]); an empty token — a special or unknown one — is never
   * allowed inside a grammar). A request's endId is allowed only where its grammar accepts. */
  guidedDecoding?: { tokenBytes: Uint8Array; tokenOffsets: Int32Array };
  /** LoRA (TensorRT-LLM's PeftCacheManagerConfig and the backend's lora_cache_* parameters). Absent or not enabled:
   * requests naming an adapter are refused. */
  lora?: NativeLoraConfig;
}

export interface NativeLoraConfig {
  enabled: boolean;
  /** Adapters read at startup: task id and Hugging Face PEFT directory (--lora-modules, ids 1, 2, ... in order). */
  preloaded: { taskId: number; dir: string }[];
  /** Adapters one batch may use; 0/absent: as many as gpuMemoryFraction holds at optimalAdapterSize (GPU), maxBatchSize (CPU). */
  maxLoras?: number;
  maxAdapterSize?: number;       // the largest rank accepted (default 64)
  optimalAdapterSize?: number;   // the rank GPU slots are sized for (default 8)
  gpuMemoryFraction?: number;    // of the device memory free after the weights (default 0.05)
  hostMemoryBytes?: number;      // adapters kept on the host, least recently used dropped past it (default 1 GiB)
}

export interface NativeLoadOptions {
  numThreads?: number;
  /** Tensor / pipeline parallel sizes; tp x pp must equal the number of MPI ranks (1 without MPI). */
  tp?: number;
  pp?: number;
  /** Expert-parallel groups within tp for mixture-of-experts models (TensorRT-LLM's moe_ep_size; each expert's
   * columns split over moe_tp = tp / ep). Default 1. */
  ep?: number;
  /** Decoder layers per pipeline stage: 'balanced' (the heaviest stage's work per token made smallest) or
   * 'a,b,...' (one count per stage). Absent: an even split, earlier stages taking the extra layer. */
  ppLayers?: string;
  /** Backend: 'cuda' needs an addon built with the CUDA backend and a GPU; 'auto' picks it when both are there. Default 'cpu'. */
  device?: 'auto' | 'cpu' | 'cuda';
  /** 'dummy': random weights of config.json's shapes (benchmarks without a checkpoint). Default 'auto'. */
  loadFormat?: 'auto' | 'dummy';
  /** 'fp8': a 16-bit checkpoint's projections quantized to FP8 per output channel at load. Default 'none'. */
  quantization?: 'none' | 'fp8';
  /** 'fp8': K/V stored as e4m3 with per-layer scales (CPU backend); 'auto': the model's precision, or FP8 where the checkpoint says its KV cache is FP8. Default 'auto'. */
  kvCacheDtype?: 'auto' | 'fp8';
  /** CUDA: 'auto' (float16 when config.json says so, else bfloat16), 'bfloat16' or 'float16'. */
  dtype?: string;
  /** CUDA: the GPU of this rank; default: its local rank modulo the visible GPUs. */
  gpuDeviceId?: number;
  /** Followers: the executor's maxNumTokens / maxBatchSize, which size a GPU rank's activation buffers. */
  maxNumTokens?: number;
  maxBatchSize?: number;
  /** Leader mode: a wait for another rank that lasts this long ends the gang, naming the rank (0: never). */
  hangTimeoutMs?: number;
  /** Speculative decoding by draft model: a Hugging Face checkpoint directory over the model's tokenizer, loaded on
   * the leading rank alone with the model's device, dtype and load format. Absent: none. */
  draftModel?: string;
  /** Speculative decoding by Medusa heads: a directory in the Medusa layout (config.json with medusa_num_heads,
   * medusa_lm_head.safetensors) for the model's hidden size and vocabulary, run on the leading rank. Absent: none. */
  medusaHeads?: string;
  /** Speculative decoding by EAGLE heads: a directory in the EAGLE-1/2 layout (a one-layer LlamaConfig config.json,
   * model.safetensors with fc.weight and layers.0.*) for the model's hidden size and vocabulary, run on the leading
   * rank on the model's final hidden states (CPU backend). Absent: none. */
  eagleHeads?: string;
}

export interface CommInfo {
  mpi: boolean;
  worldRank: number;
  worldSize: number;
  localRank: number;
  localSize: number;
  host: string;
  library: string;
  /** In the whole MPI job (differs from world* in a group joined with joinGroup). */
  jobRank: number;
  jobSize: number;
  /** Started by MPI_Comm_spawn: a worker group of an orchestrator. */
  spawned: boolean;
}

/** One rank as the liveness watch saw it (native/engine/comm/liveness.h). */
export interface RankActivity {
  rank: number;
  host: string;
  /** False: it did not answer the leader's question (stopped, or stuck outside any wait). */
  answered: boolean;
  /** Forward passes begun: the number of the plan the gang is on. */
  iteration: number;
  step: string;           // 'forward', 'allocate_kv', 'copy_kv_block', 'idle'
  waitingFor: string;     // 'all-reduce', 'recv from rank 2', 'the next plan'; '' while computing
  seconds: number;        // in that wait
}

/** An event of this process's liveness watch: the leader's stall (readiness turns 503) and its end, or a hang — after
 * which the gang ends as soon as the handler returns. */
export interface LivenessEvent {
  kind: 'stalled' | 'resumed' | 'hang';
  self: RankActivity;
  hangTimeoutMs: number;
  /** hang: the ranks that made no progress (empty: every rank answered, each waiting for another). */
  culprits: number[];
  /** hang: every other rank, as it answered or did not. */
  others: RankActivity[];
}

export interface KvCacheStats {
  maxNumBlocks: number;
  freeNumBlocks: number;
  usedNumBlocks: number;
  tokensPerBlock: number;
  allocTotalBlocks: number;
  allocNewBlocks: number;
  reusedBlocks: number;
}

/** One KV cache event (TensorRT-LLM's KVCacheEvent). Block hashes are 64-bit values as decimal strings, exact in
 * JS; a stored event's parentHash equals the blockHash an earlier stored event gave (null: a sequence's first
 * block). eventIds count up from 0; a gap means a full buffer dropped events. */
export type KvCacheEvent = { eventId: number; windowSize: number; replica?: number /* --dp: the replica that sent it (set by the orchestrator) */ } & (
  | { type: 'created'; numBlocks: number }
  | { type: 'stored'; parentHash: string | null; blocks: { blockHash: string; tokens: number[] }[] }
  | { type: 'removed'; blockHashes: string[] }
);

export interface IterationStats {
  timestamp: number;
  iter: number;
  iterLatencyMs: number;
  numActiveRequests: number;
  numQueuedRequests: number;
  maxNumActiveRequests: number;
  numCompletedRequests: number;
  cpuMemUsage: number;
  gpuMemUsage: number;
  /** Leader mode: seconds and bytes of this iteration's MPI calls on the leader, and its plan broadcast's size. */
  commSeconds: number;
  commBytes: number;
  planBytes: number;
  kvCacheStats: KvCacheStats;
  inflightBatchingStats: {
    numScheduledRequests: number;
    numContextRequests: number;
    numGenRequests: number;
    numPausedRequests: number;
    numCtxTokens: number;
    microBatchId: number;
    avgNumDecodedTokensPerIter: number;
  };
  /** Speculative decoding this iteration: guessed tokens checked, those kept, and the requests that carried any. */
  specDecodingStats: { numDraftTokens: number; numAcceptedTokens: number; numRequestsWithDraftTokens: number };
}

export interface ModelConfig {
  architecture: 'llama' | 'gpt2';
  architectureName: string;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  intermediateSize: number;
  /** Mixture-of-experts models: experts per MoE layer and how many each token uses (0 and 0: a dense model). */
  numExperts: number;
  expertsPerToken: number;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  bosTokenId: number;
  eosTokenIds: number[];
  padTokenId: number;
  /** How the checkpoint's weights are quantized ('' when they are not): "fp8 (HF fp8, block 128x128 weight scales, ...)". */
  quantization: string;
  /** How the loaded model stores its KV cache: "float32", "bfloat16", "fp8 (e4m3, per-layer k/v scales ...)"; '' before a model is loaded. */
  kvCacheDtype: string;
  /** How the tp group's sums run on the GPUs: "peer memory (...)" or "NCCL only: <why>"; '' without GPU collectives. */
  tpAllReduce?: string;
  /** The loaded executor's pipelined pp: micro-batches kept in flight (1: its stages run one after the other). */
  ppMicroBatches?: number;
}

export interface AddonExecutor {
  enqueue(request: NativeRequest): number;
  cancel(requestId: number): void;
  getLatestIterationStats(): IterationStats[];
  kvCacheStats(): KvCacheStats;
  /** Drains the KV cache events recorded since the last call, oldest first ([] when events are off). */
  getLatestKvCacheEvents(): KvCacheEvent[];
  /** Events a full buffer dropped since the executor started. */
  kvCacheEventsDropped(): number;
  numActiveRequests(): number;
  modelConfig(): ModelConfig;
  shutdown(): Promise<void>;
  /** Test hook: the loop runs at most `n` more iterations, then holds (enqueues wait in the queue, a cancel still
   * ends its request at once); n < 0: no limit (the default). `n` must be an integer. */
  holdIterations(n: number): void;
  /** True once the loop holds after its allowed iterations, with every response batch of those iterations already
   * delivered to onResponses; false after `timeoutMs` or once the executor stopped. */
  awaitHeld(timeoutMs: number): Promise<boolean>;
}

/** Orchestrator mode: byte messages between the orchestrator and each worker group's rank 0 (comm-link.h). */
export interface AddonLinks {
  count(): number;
  connected(index: number): boolean;
  /** Starts the poller thread; arrived messages come in batches of [link index, tag, bytes]. */
  listen(onMessages: (batch: [number, number, Buffer][]) => void): void;
  send(index: number, tag: number, bytes: Uint8Array): void;
  pending(index: number): number;
  /** Stops polling a link; MPI_Comm_disconnect unless `dropOnly` (a dead peer is never waited for). */
  disconnect(index: number, dropOnly?: boolean): void;
  /** Stops the poller thread (the links stay as they are). */
  close(): void;
}

export interface SpawnSpec {
  command: string;
  args: string[];
  processes: number;
  host?: string;
}

export interface BuildInfo {
  blas: 'openblas' | 'builtin';
  backends: string[];
  napiVersion: number;
  /** How the CUDA backend was built, or why it was not. */
  cuda: string;
  /** GPUs the CUDA backend sees (0 without it). */
  cudaDevices: number;
}

export interface Addon {
  setErrorClass(errorClass: new (message: string, code: string) => Error): void;
  buildInfo(): BuildInfo;
  loadExecutor(
    modelDir: string,
    config: NativeExecutorConfig,
    options: NativeLoadOptions,
    onResponses: (batch: NativeResponse[]) => void,
    onProgress?: (done: number, total: number) => void,
  ): Promise<AddonExecutor>;
  readModelConfig(modelDir: string): ModelConfig;
  /** Throws (invalid_argument, the engine's words: "num_attention_heads 4 is not divisible by tp 3") when a tp x pp
   * grid cannot split the model in `modelDir`: the check every rank makes when it loads, made before any starts. */
  checkParallelLayout(modelDir: string, tp: number, pp: number, ep?: number, ppLayers?: string): void;
  /** Starts MPI when `useMpi` (once per process; later calls return the same info); orchestrator mode asks for
   * MPI_THREAD_MULTIPLE. */
  commInit(useMpi: boolean, threadMultiple?: boolean): CommInfo;
  /** A follower rank's whole life: load its shard, apply the leader's plans, resolve when the leader shuts down. */
  runFollower(modelDir: string, options: NativeLoadOptions, onProgress?: (done: number, total: number) => void): Promise<void>;
  /** The orchestrator: MPI_Comm_spawn one group per spec, in order; one link per group. */
  spawnGroups(specs: SpawnSpec[]): Promise<AddonLinks>;
  /** A spawned group's rank: its link to the orchestrator (unconnected when not spawned). */
  linkToParent(): AddonLinks;
  /** No-spawn variant: this rank joins group `color` (0: the orchestrator); collective over the job. */
  joinGroup(color: number): CommInfo;
  /** No-spawn variant, after joinGroup: the orchestrator's links to groups 1..numGroups, or a group's link to it. */
  linkGroups(color: number, numGroups: number): Promise<AddonLinks>;
  /** Ends MPI in a process that ran no executor (the orchestrator); MPI_Finalize waits for connected groups. */
  commFinalize(): void;
  /** Host and pid of every rank of this process's group, in rank order; collective over the group. */
  groupMembers(): { host: string; pid: number }[];
  /** Every event of this process's liveness watch, on the JS thread. After a hang event the gang ends as soon as
   * `onEvent` returns (or within seconds if it does not), so what it writes it must write synchronously. */
  watchLiveness(onEvent: (event: LivenessEvent) => void): void;
  /** True while the leader's gang cannot answer: one of its waits passed half the hang timeout. */
  livenessStalled(): boolean;
  /** PR_SET_PDEATHSIG: the kernel sends `signal` to this process the moment its parent exits (a rank bound to the
   * mpirun, orted or slurmstepd that started it). Returns the parent's pid, read after the setting. */
  setParentDeathSignal(signal: number): number;
}

/** The export names, for the test that compares them with what the addon really exports. */
export const ADDON_EXPORTS = [
  'setErrorClass', 'buildInfo', 'loadExecutor', 'readModelConfig', 'checkParallelLayout', 'commInit', 'runFollower', 'spawnGroups', 'linkToParent',
  'joinGroup', 'linkGroups', 'groupMembers', 'commFinalize', 'watchLiveness', 'livenessStalled', 'setParentDeathSignal',
] as const;
export const ADDON_EXECUTOR_METHODS = [
  'enqueue', 'cancel', 'getLatestIterationStats', 'kvCacheStats', 'getLatestKvCacheEvents', 'kvCacheEventsDropped',
  'numActiveRequests', 'modelConfig', 'shutdown', 'holdIterations', 'awaitHeld',
] as const;
