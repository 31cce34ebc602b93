// The typed facade over the native executor: validates requests, routes each iteration's responses to the request
// they belong to, and exposes them as async iterables (streaming) or one promise (whole result).
import type {
  AddonExecutor, IterationStats, KvCacheEvent, KvCacheStats, ModelConfig, NativeExecutorConfig, NativeLoadOptions, NativeRequest,
  NativeResponse,
} from '../binding/addon-types.js';
import { describeValue, TrtllmError } from '../common/errors.js';
import { loadAddon } from '../binding/load-addon.js';
import { loraModuleDirsProblem, loraProblem } from '../options/lora-options.js';
import { medusaChoicesOf } from '../options/medusa-choices.js';
import { ActiveRequests } from './active-requests.js';
import { checkDraftTokenizer } from './draft-compat.js';
import { type LoraOptions, takeLoraOptions } from './lora-config.js';
import { RequestHandle } from './request-handle.js';
import { guidedVocabulary } from '../token-bytes.js';
import type { ServingExecutor } from './serving-executor.js';
import { type RequestLimits, validateRequest } from './validate-request.js';

export interface ExecutorOptions extends Omit<NativeExecutorConfig, 'medusaChoices' | 'eagleChoices'>, NativeLoadOptions, LoraOptions {
  onProgress?: (done: number, total: number) => void;
  /** --medusa-choices: the JSON text of the paths (NativeExecutorConfig.medusaChoices). */
  medusaChoices?: string;
  /** --eagle-choices: the JSON text of the paths (NativeExecutorConfig.eagleChoices). */
  eagleChoices?: string;
}

const DEFAULT_CUT_MESSAGE = 'the request was cancelled before it finished: the drain deadline ran out';

export class Executor implements ServingExecutor {
  private readonly active = new ActiveRequests<RequestHandle>();
  private readonly statsListeners = new Set<(batch: IterationStats[]) => void>();
  private readonly responseListeners = new Set<(batch: NativeResponse[]) => void>();
  // Requests a drain cancelled at its deadline, with the error their final response carries (see drain).
  private readonly cutByDrain = new Map<number, string>();
  private holdThroughDrain = false;
  private closed = false;

  private constructor(
    private readonly native: AddonExecutor,
    readonly modelConfig: ModelConfig,
    readonly limits: RequestLimits,
    router: { deliver?: (batch: NativeResponse[]) => void },
  ) {
    router.deliver = (batch) => this.route(batch);
  }

  /** Loads the checkpoint in `modelDir` on a worker thread and starts the executor loop. */
  static async load(modelDir: string, options: ExecutorOptions = {}): Promise<Executor> {
    const addon = loadAddon();
    const { lora, rest } = takeLoraOptions(options);
    const { onProgress, numThreads, tp, pp, ep, ppLayers, device, loadFormat, quantization, kvCacheDtype, dtype, gpuDeviceId, hangTimeoutMs, draftModel, medusaHeads, medusaChoices, eagleHeads, eagleChoices, ...engineConfig } = rest;
    const config: NativeExecutorConfig = {
      ...engineConfig, ...(medusaChoices === undefined ? {} : { medusaChoices: medusaChoicesOf(medusaChoices) }),
      ...(eagleChoices === undefined ? {} : { eagleChoices: medusaChoicesOf(eagleChoices) }),
    };
    // The LoRA options together, and the preloaded adapters' directories: named here, not as an engine error.
    const loraOptions = loraProblem(options) ?? (lora ? loraModuleDirsProblem(options.loraModules) : undefined);
    if (loraOptions) throw new TrtllmError(loraOptions, 'invalid_argument');
    if (lora) config.lora = lora;
    // One drafter at a time: each is a different answer to what the guesses are.
    const drafters = [
      ...(draftModel === undefined ? [] : [`--draft-model ${draftModel}`]), ...(medusaHeads === undefined ? [] : [`--medusa-heads ${medusaHeads}`]),
      ...((config.ngramDraftTokens ?? 0) > 0 ? [`--speculative-ngram ${config.ngramDraftTokens}`] : []),
      ...(eagleHeads === undefined ? [] : [`--eagle-heads ${eagleHeads}`]),
    ];
    if (drafters.length > 1) {
      throw new TrtllmError(`${drafters.join(' and ')} each choose how guesses are made; give one of them`, 'invalid_argument');
    }
    if (draftModel !== undefined) checkDraftTokenizer(modelDir, draftModel);
    const modelConfig = addon.readModelConfig(modelDir);
    // Guided decoding needs the tokenizer's bytes; a checkpoint without a known tokenizer serves unconstrained only.
    if (!config.guidedDecoding) {
      const vocabulary = guidedVocabulary(modelDir, modelConfig.vocabSize);
      if (vocabulary) config.guidedDecoding = vocabulary;
    }
    const router: { deliver?: (batch: NativeResponse[]) => void } = {};
    const native = await addon.loadExecutor(
      modelDir, config, {
        ...(numThreads === undefined ? {} : { numThreads }), ...(tp === undefined ? {} : { tp }), ...(pp === undefined ? {} : { pp }),
        ...(ep === undefined ? {} : { ep }), ...(ppLayers === undefined ? {} : { ppLayers }),
        ...(device === undefined ? {} : { device }), ...(loadFormat === undefined ? {} : { loadFormat }),
        ...(quantization === undefined ? {} : { quantization }), ...(kvCacheDtype === undefined ? {} : { kvCacheDtype }),
        ...(dtype === undefined ? {} : { dtype }), ...(gpuDeviceId === undefined ? {} : { gpuDeviceId }),
        ...(hangTimeoutMs === undefined ? {} : { hangTimeoutMs }), ...(draftModel === undefined ? {} : { draftModel }),
        ...(medusaHeads === undefined ? {} : { medusaHeads }), ...(eagleHeads === undefined ? {} : { eagleHeads }),
      },
      (batch) => router.deliver?.(batch), onProgress,
    );
    const limits: RequestLimits = {
      vocabSize: modelConfig.vocabSize,
      maxSeqLen: config.maxSeqLen && config.maxSeqLen > 0 ? config.maxSeqLen : modelConfig.maxPositionEmbeddings,
      maxNumTokens: config.maxNumTokens ?? 8192,
      maxBeamWidth: config.maxBeamWidth ?? 1,
      chunkedContext: config.enableChunkedContext ?? false,
      maxLogitsElements: config.maxLogitsElements ?? 2 ** 28,
      hiddenSize: modelConfig.hiddenSize,
    };
    // What only the loaded executor knows: its KV cache's dtype, how its tp sums run, its pp micro-batches.
    const loaded = native.modelConfig();
    return new Executor(native, {
      ...modelConfig, kvCacheDtype: loaded.kvCacheDtype,
      ...(loaded.tpAllReduce === undefined ? {} : { tpAllReduce: loaded.tpAllReduce }),
      ...(loaded.ppMicroBatches === undefined ? {} : { ppMicroBatches: loaded.ppMicroBatches }),
    }, limits, router);
  }

  private route(batch: NativeResponse[]): void {
    for (let i = 0; i < batch.length; i += 1) {
      const response = batch[i] = this.markCut(batch[i]!);
      const handle = this.active.get(response.requestId);
      if (!handle) continue;
      handle.push(response);
      if (response.isFinal) this.active.finish(response.requestId);
    }
    for (const listener of this.responseListeners) listener(batch);
  }

  /** A request the drain cut off ends with an error, so no interface can present its partial output as complete;
   * one that finished on its own in the same iteration keeps its result. */
  private markCut(response: NativeResponse): NativeResponse {
    if (!response.isFinal) return response;
    const message = this.cutByDrain.get(response.requestId);
    if (message === undefined) return response;
    this.cutByDrain.delete(response.requestId);
    if (response.error || !response.finishReasons?.includes('cancelled')) return response;
    return { ...response, error: { code: 'shutdown', message } };
  }

  /** Sees every iteration's responses as delivered (an orchestrator's worker group forwards them whole). */
  onResponses(listener: (batch: NativeResponse[]) => void): () => void {
    this.responseListeners.add(listener);
    return () => this.responseListeners.delete(listener);
  }

  /** Validates and enqueues; throws TrtllmError (invalid_argument, queue_full, shutdown). */
  enqueue(request: NativeRequest): RequestHandle {
    if (this.closed) throw new TrtllmError('the executor has been shut down', 'shutdown');
    const valid = validateRequest(request, this.limits);
    const id = this.native.enqueue(valid);
    const handle = new RequestHandle(id, (rid) => this.native.cancel(rid));
    this.active.add(id, handle);
    return handle;
  }

  /** Enqueues and waits for the final response. */
  async generate(request: NativeRequest): Promise<NativeResponse> {
    return this.enqueue(request).result();
  }

  cancel(requestId: number): void {
    this.native.cancel(requestId);
  }

  /**
   * The iterations since the last call (the native side drains on read). Every listener registered with
   * onIterationStats sees the same batch, so metrics and any other consumer can share the one stream.
   */
  iterationStats(): IterationStats[] {
    const batch = this.native.getLatestIterationStats();
    if (batch.length > 0) for (const listener of this.statsListeners) listener(batch);
    return batch;
  }

  /** Registers a consumer of every drained batch of iteration stats; returns the unsubscribe function. */
  onIterationStats(listener: (batch: IterationStats[]) => void): () => void {
    this.statsListeners.add(listener);
    return () => this.statsListeners.delete(listener);
  }

  kvCacheStats(): KvCacheStats {
    return this.native.kvCacheStats();
  }

  /** TensorRT-LLM's getLatestKvCacheEvents: the events since the last call, oldest first (the native side drains on
   * read, so one consumer should own them: the /kv_cache_events route). [] unless kvCacheEventBufferMaxSize > 0 with
   * enableKvCacheReuse. */
  getLatestKvCacheEvents(): KvCacheEvent[] {
    return this.native.getLatestKvCacheEvents();
  }

  /** Events a full buffer dropped since the executor started (a gap in eventId says the same to a client). */
  kvCacheEventsDropped(): number {
    return this.native.kvCacheEventsDropped();
  }

  /** Leader mode: the gang this executor leads cannot answer now — one of its waits for another rank has lasted half
   * the hang timeout (the liveness watch is asking the other ranks). Always false on one rank. */
  clusterStalled(): boolean {
    return loadAddon().livenessStalled();
  }

  numActiveRequests(): number {
    return this.native.numActiveRequests();
  }

  /**
   * Test hook, so a test fixes the order of events instead of sleeping: after this call the executor's loop runs at
   * most `n` more iterations and then holds — no iteration starts, enqueued requests wait in the queue, a cancel
   * still ends its request at once (final `cancelled` response, KV blocks freed). n < 0: no limit (the default). In
   * leader mode it holds the leader's loop; followers wait for its next plan. A drain lifts it — unless
   * `throughDrain`: then the hold stays until the test lifts it (n < 0), so a test can look at a server while it
   * drains with its requests still in flight (a drain lifting the hold would race the test's look).
   */
  holdIterations(n: number, options: { throughDrain?: boolean } = {}): void {
    if (!Number.isInteger(n)) {
      throw new TrtllmError(`Expected holdIterations' "n" to be an integer, got ${describeValue(n)}`, 'invalid_argument');
    }
    this.holdThroughDrain = n >= 0 && options.throughDrain === true;
    this.native.holdIterations(n);
  }

  /**
   * Resolves true once the loop holds after the iterations holdIterations allowed, with every response of those
   * iterations already routed to its request; false after `timeoutMs` or once the executor stopped. Waits on a
   * native worker thread: the event loop keeps running.
   */
  awaitHeld(timeoutMs = 60_000): Promise<boolean> {
    if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0)) {
      const got = describeValue(timeoutMs);
      throw new TrtllmError(`Expected awaitHeld's "timeoutMs" to be a non-negative number, got ${got}`, 'invalid_argument');
    }
    return this.native.awaitHeld(Math.min(timeoutMs, 2 ** 31 - 1));
  }

  /**
   * Waits for the requests in flight to end: resolves when none is active, or at `deadline` (epoch ms) cancels what
   * is left — `onDeadline` hears how many — and resolves once their final responses have been delivered. It resolves
   * on the last final response itself (no polling). A server's drain: stop admitting, `drain`, then `shutdown`.
   * The final response of a request cancelled at the deadline carries the error `shutdown` with `cutMessage`, so
   * the frontend answers it as failed (a 503, an SSE error event, a gRPC error) rather than as a complete result.
   * A drain runs the work to its end: it lifts a test's hold (holdIterations, unless held `throughDrain`) — after
   * the cancels of a deadline already passed, so a held request past it ends cancelled rather than running.
   */
  drain(deadline: number, onDeadline?: (remaining: number) => void, cutMessage = DEFAULT_CUT_MESSAGE): Promise<void> {
    const cut = (id: number) => {
      this.cutByDrain.set(id, cutMessage);
      this.native.cancel(id);
    };
    const drained = this.active.drain(deadline, cut, onDeadline);
    if (!this.holdThroughDrain) this.holdIterations(-1);
    return drained;
  }

  /** Cancels what is running (each gets a final `cancelled` response) and stops the loop thread. */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.native.shutdown();
  }
}
