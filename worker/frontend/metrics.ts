// The Prometheus registry served on the metrics port: Triton's TensorRT-LLM families with Triton's names and
// labels (so existing dashboards keep working), fed from the executor's iteration stats; Triton's nv_inference_*
// request counters; and what Triton lacks — latency histograms and token counters in Prometheus base units.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

import type { IterationStats, KvCacheStats } from '../binding/addon-types.js';
import type { Precision } from '../executor/precision.js';

export const MODEL_VERSION = '1';
const ENGINE_MODEL = 'tensorrt_llm';  // Triton reports batcher stats under the tensorrt_llm model

export interface MetricsSource {
  kvCacheStats(): KvCacheStats;
  numActiveRequests(): number;
  iterationStats(): IterationStats[];   // fans out to onIterationStats listeners, including ours
}

/** Per-request timing, started when the HTTP request arrives. */
export interface RequestTracker {
  inputDone(promptTokens: number): void;      // tokenization finished, request handed to the executor
  tokens(n: number): void;                      // n tokens reached the client
  finish(ok: boolean, queueSeconds?: number): void;
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const ITL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

class FamilyMaker {
  constructor(readonly registry: Registry) {}

  // A family already in a shared registry (another model's) is reused: prom-client allows one per name.
  family<T>(name: string, create: () => T): T {
    return (this.registry.getSingleMetric(name) as T | undefined) ?? create();
  }

  gauge(name: string, help: string, kind: string): Gauge {
    return this.family(name, () => new Gauge({ name, help, labelNames: ['model', kind, 'version'], registers: [this.registry] }));
  }

  counter(name: string, help: string): Counter {
    return this.family(name, () => new Counter({ name, help, labelNames: ['model', 'version'], registers: [this.registry] }));
  }

  histogram(name: string, help: string, buckets: number[]): Histogram {
    return this.family(name, () => new Histogram({ name, help, labelNames: ['model', 'version'], buckets, registers: [this.registry] }));
  }
}

/** The metric families, created in (or found in) one registry. */
function families(m: FamilyMaker) {
  return {
    request: m.gauge('nv_trt_llm_request_metrics', 'TRT LLM request metrics', 'request_type'),
    memory: m.gauge('nv_trt_llm_runtime_memory_metrics', 'TRT LLM runtime memory metrics', 'memory_type'),
    kv: m.gauge('nv_trt_llm_kv_cache_block_metrics', 'TRT LLM KV cache block metrics', 'kv_cache_block_type'),
    ifb: m.gauge('nv_trt_llm_inflight_batcher_metrics', 'TRT LLM inflight_batcher-specific metrics', 'inflight_batcher_specific_metric'),
    general: m.gauge('nv_trt_llm_general_metrics', 'General TRT LLM metrics', 'general_type'),

    success: m.counter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes'),
    failure: m.counter('nv_inference_request_failure', 'Number of failed inference requests, all batch sizes'),
    count: m.counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)'),
    execCount: m.counter('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)'),
    requestUs: m.counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)'),
    queueUs: m.counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)'),
    inputUs: m.counter('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)'),
    inferUs: m.counter('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)'),
    outputUs: m.counter('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)'),
    pendingGauge: m.family('nv_inference_pending_request_count', () => new Gauge({
      name: 'nv_inference_pending_request_count', help: 'Instantaneous number of pending requests awaiting execution per-model.',
      labelNames: ['model', 'version'], registers: [m.registry],
    })),

    ttft: m.histogram('trtllm_time_to_first_token_seconds', 'Time from request arrival to its first output token reaching the client', LATENCY_BUCKETS),
    itl: m.histogram('trtllm_inter_token_latency_seconds', 'Time between consecutive output tokens of a request', ITL_BUCKETS),
    e2e: m.histogram('trtllm_e2e_request_latency_seconds', 'Time from request arrival to its last response', LATENCY_BUCKETS),
    queue: m.histogram('trtllm_request_queue_time_seconds', 'Time a request waited in the executor queue before its first iteration', LATENCY_BUCKETS),
    promptTokens: m.counter('trtllm_prompt_tokens_total', 'Prompt tokens of finished requests'),
    generationTokens: m.counter('trtllm_generation_tokens_total', 'Output tokens sent to clients'),
    iterationSeconds: m.counter('trtllm_iteration_seconds_total', 'Time the executor spent running iterations (its busy time)'),
    iterations: m.counter('trtllm_iterations_total', 'Executor iterations run'),
    // Speculative decoding (--speculative-ngram): acceptance rate = accepted / draft tokens; mean tokens a speculating
    // request gains per step = 1 + accepted / drafts.
    specDraftTokens: m.counter('trtllm_spec_decode_draft_tokens_total', 'Tokens guessed by speculative decoding and checked by the model'),
    specAcceptedTokens: m.counter('trtllm_spec_decode_accepted_tokens_total', 'Guessed tokens the model agreed with (kept in the output)'),
    specDrafts: m.counter('trtllm_spec_decode_drafts_total', 'Request steps that carried guessed tokens'),
    precision: m.family('trtllm_model_precision_info', () => new Gauge({
      name: 'trtllm_model_precision_info', help: 'Which precision the model runs: its weights and its KV cache (always 1)',
      labelNames: ['model', 'version', 'weights', 'kv_cache'], registers: [m.registry],
    })),
    // Not per model: the connection ends before the body says which model it was for.
    clientDisconnects: m.family('trtllm_http_client_disconnects_total', () => new Counter({
      name: 'trtllm_http_client_disconnects_total',
      help: 'HTTP requests whose client left before sending the whole body (a short body, a reset, a half-close); answered with nothing, not counted as failures',
      labelNames: ['stage'], registers: [m.registry],
    })),
  };
}

export interface MetricsOptions {
  /** Orchestrator mode: every model's metrics go to one registry, their executor gauges labelled by model name. */
  registry?: Registry;
  engineModel?: string;
  /** Which precision the model runs, as the startup log says it: trtllm_model_precision_info{weights, kv_cache} 1. */
  precision?: Precision;
}

export class ServingMetrics {
  readonly registry: Registry;
  private readonly labels: { model: string; version: string };
  private lastIteration: IterationStats | undefined;
  private readonly f: ReturnType<typeof families>;

  constructor(private readonly source: MetricsSource, models: readonly string[], options: MetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    this.labels = { model: options.engineModel ?? ENGINE_MODEL, version: MODEL_VERSION };
    this.f = families(new FamilyMaker(this.registry));
    if (!options.registry) collectDefaultMetrics({ register: this.registry });
    // Every family appears from the first scrape on, at zero, as Triton's do.
    for (const model of models) {
      const l = { model, version: MODEL_VERSION };
      for (const c of [this.f.success, this.f.failure, this.f.count, this.f.execCount, this.f.requestUs, this.f.queueUs, this.f.inputUs,
        this.f.inferUs, this.f.outputUs, this.f.promptTokens, this.f.generationTokens]) c.inc(l, 0);
      this.f.pendingGauge.set(l, 0);
      for (const h of [this.f.ttft, this.f.itl, this.f.e2e, this.f.queue]) h.zero(l);
    }
    for (const c of [this.f.iterationSeconds, this.f.iterations, this.f.specDraftTokens, this.f.specAcceptedTokens, this.f.specDrafts]) c.inc(this.labels, 0);
    this.f.clientDisconnects.inc({ stage: 'request_body' }, 0);
    if (options.precision) this.f.precision.set({ ...this.labels, weights: options.precision.weights, kv_cache: options.precision.kvCache }, 1);
    this.refresh();
  }

  /** A client left while its request body was being read (http-server.ts's onClientGone). */
  clientGone(): void {
    this.f.clientDisconnects.inc({ stage: 'request_body' });
  }

  /** Listener for Executor.onIterationStats: cumulative counters need every iteration, gauges the latest. */
  readonly onIterationStats = (batch: IterationStats[]): void => {
    if (batch.length === 0) return;
    let seconds = 0, drafted = 0, accepted = 0, drafts = 0;
    for (const s of batch) {
      seconds += s.iterLatencyMs / 1000;
      drafted += s.specDecodingStats?.numDraftTokens ?? 0;
      accepted += s.specDecodingStats?.numAcceptedTokens ?? 0;
      drafts += s.specDecodingStats?.numRequestsWithDraftTokens ?? 0;
    }
    this.f.iterationSeconds.inc(this.labels, seconds);
    this.f.iterations.inc(this.labels, batch.length);
    this.f.specDraftTokens.inc(this.labels, drafted);
    this.f.specAcceptedTokens.inc(this.labels, accepted);
    this.f.specDrafts.inc(this.labels, drafts);
    this.lastIteration = batch[batch.length - 1];
  };

  /** Brings every gauge up to date; called on each scrape. */
  refresh(): void {
    this.source.iterationStats();
    const live = this.source.kvCacheStats();
    const active = this.source.numActiveRequests();
    const it = this.lastIteration;
    // An idle executor runs no iterations: report the live state rather than the last busy iteration's.
    const busy = active > 0;
    const l = this.labels;
    this.f.request.set({ ...l, request_type: 'active' }, active);
    this.f.request.set({ ...l, request_type: 'max' }, it?.maxNumActiveRequests ?? 0);
    this.f.request.set({ ...l, request_type: 'scheduled' }, busy ? it?.inflightBatchingStats.numScheduledRequests ?? 0 : 0);
    this.f.request.set({ ...l, request_type: 'context' }, busy ? it?.inflightBatchingStats.numContextRequests ?? 0 : 0);
    this.f.request.set({ ...l, request_type: 'waiting' }, busy ? it?.numQueuedRequests ?? 0 : 0);
    this.f.memory.set({ ...l, memory_type: 'cpu' }, it?.cpuMemUsage ?? 0);
    this.f.memory.set({ ...l, memory_type: 'gpu' }, it?.gpuMemUsage ?? 0);
    this.f.memory.set({ ...l, memory_type: 'pinned' }, 0);
    this.f.kv.set({ ...l, kv_cache_block_type: 'max' }, live.maxNumBlocks);
    this.f.kv.set({ ...l, kv_cache_block_type: 'free' }, live.freeNumBlocks);
    this.f.kv.set({ ...l, kv_cache_block_type: 'used' }, live.usedNumBlocks);
    this.f.kv.set({ ...l, kv_cache_block_type: 'tokens_per' }, live.tokensPerBlock);
    this.f.kv.set({ ...l, kv_cache_block_type: 'reused' }, live.reusedBlocks);
    this.f.kv.set({ ...l, kv_cache_block_type: 'fraction' }, live.maxNumBlocks > 0 ? live.usedNumBlocks / live.maxNumBlocks : 0);
    const ifb = it?.inflightBatchingStats;
    this.f.ifb.set({ ...l, inflight_batcher_specific_metric: 'micro_batch_id' }, ifb?.microBatchId ?? 0);
    this.f.ifb.set({ ...l, inflight_batcher_specific_metric: 'generation_requests' }, busy ? ifb?.numGenRequests ?? 0 : 0);
    this.f.ifb.set({ ...l, inflight_batcher_specific_metric: 'total_context_tokens' }, busy ? ifb?.numCtxTokens ?? 0 : 0);
    this.f.ifb.set({ ...l, inflight_batcher_specific_metric: 'paused_requests' }, busy ? ifb?.numPausedRequests ?? 0 : 0);
    this.f.general.set({ ...l, general_type: 'iteration_counter' }, it ? it.iter + 1 : 0);
    this.f.general.set({ ...l, general_type: 'timestamp' }, it?.timestamp ?? 0);
  }

  /** The text exposition, refreshed. */
  async scrape(): Promise<string> {
    this.refresh();
    return this.registry.metrics();
  }

  trackRequest(model: string, inferences = 1): RequestTracker {
    const l = { model, version: MODEL_VERSION };
    const start = performance.now();
    let enqueued = 0;
    let first = 0;
    let last = 0;
    let done = false;
    let prompt = 0;
    this.f.pendingGauge.inc(l);
    return {
      inputDone: (promptTokens) => {
        enqueued = performance.now();
        prompt += promptTokens;
      },
      tokens: (n) => {
        if (n <= 0) return;
        const now = performance.now();
        if (first === 0) {
          first = now;
          this.f.ttft.observe(l, (now - start) / 1000);
          for (let i = 1; i < n; i += 1) this.f.itl.observe(l, 0);
        } else {
          const gap = (now - last) / 1000 / n;
          for (let i = 0; i < n; i += 1) this.f.itl.observe(l, gap);
        }
        last = now;
        this.f.generationTokens.inc(l, n);
      },
      finish: (ok, queueSeconds) => {
        if (done) return;
        done = true;
        const now = performance.now();
        this.f.pendingGauge.dec(l);
        (ok ? this.f.success : this.f.failure).inc(l);
        if (!ok) return;
        this.f.count.inc(l, inferences);
        this.f.execCount.inc(l);
        this.f.e2e.observe(l, (now - start) / 1000);
        this.f.requestUs.inc(l, Math.round((now - start) * 1000));
        const inputEnd = enqueued || start;
        this.f.inputUs.inc(l, Math.round((inputEnd - start) * 1000));
        const inferEnd = last || now;
        this.f.inferUs.inc(l, Math.round(Math.max(0, inferEnd - inputEnd) * 1000));
        this.f.outputUs.inc(l, Math.round(Math.max(0, now - inferEnd) * 1000));
        if (queueSeconds !== undefined && queueSeconds >= 0) {
          this.f.queue.observe(l, queueSeconds);
          this.f.queueUs.inc(l, Math.round(queueSeconds * 1e6));
        }
        this.f.promptTokens.inc(l, prompt);
      },
    };
  }
}
