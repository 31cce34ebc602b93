// The Prometheus registry served on the metrics port: Triton's TensorRT-LLM families with Triton's names and
// labels (so existing dashboards keep working), fed from the executor's iteration stats; Triton's nv_inference_*
// request counters; and what Triton lacks — latency histograms and token counters in Prometheus base units.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

import type { IterationStats, KvCacheStats } from '../binding/addon-types.js';

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

export class ServingMetrics {
  readonly registry = new Registry();
  private readonly labels = { model: ENGINE_MODEL, version: MODEL_VERSION };
  private lastIteration: IterationStats | undefined;

  private readonly request = this.gauge('nv_trt_llm_request_metrics', 'TRT LLM request metrics', 'request_type');
  private readonly memory = this.gauge('nv_trt_llm_runtime_memory_metrics', 'TRT LLM runtime memory metrics', 'memory_type');
  private readonly kv = this.gauge('nv_trt_llm_kv_cache_block_metrics', 'TRT LLM KV cache block metrics', 'kv_cache_block_type');
  private readonly ifb = this.gauge('nv_trt_llm_inflight_batcher_metrics', 'TRT LLM inflight_batcher-specific metrics', 'inflight_batcher_specific_metric');
  private readonly general = this.gauge('nv_trt_llm_general_metrics', 'General TRT LLM metrics', 'general_type');

  private readonly success = this.counter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes');
  private readonly failure = this.counter('nv_inference_request_failure', 'Number of failed inference requests, all batch sizes');
  private readonly count = this.counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)');
  private readonly execCount = this.counter('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)');
  private readonly requestUs = this.counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)');
  private readonly queueUs = this.counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)');
  private readonly inputUs = this.counter('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)');
  private readonly inferUs = this.counter('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)');
  private readonly outputUs = this.counter('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)');
  private readonly pendingGauge = new Gauge({
    name: 'nv_inference_pending_request_count', help: 'Instantaneous number of pending requests awaiting execution per-model.',
    labelNames: ['model', 'version'], registers: [this.registry],
  });

  private readonly ttft = this.histogram('trtllm_time_to_first_token_seconds', 'Time from request arrival to its first output token reaching the client', LATENCY_BUCKETS);
  private readonly itl = this.histogram('trtllm_inter_token_latency_seconds', 'Time between consecutive output tokens of a request', ITL_BUCKETS);
  private readonly e2e = this.histogram('trtllm_e2e_request_latency_seconds', 'Time from request arrival to its last response', LATENCY_BUCKETS);
  private readonly queue = this.histogram('trtllm_request_queue_time_seconds', 'Time a request waited in the executor queue before its first iteration', LATENCY_BUCKETS);
  private readonly promptTokens = this.counter('trtllm_prompt_tokens_total', 'Prompt tokens of finished requests');
  private readonly generationTokens = this.counter('trtllm_generation_tokens_total', 'Output tokens sent to clients');
  private readonly iterationSeconds = new Counter({
    name: 'trtllm_iteration_seconds_total', help: 'Time the executor spent running iterations (its busy time)',
    labelNames: ['model', 'version'], registers: [this.registry],
  });
  private readonly iterations = new Counter({
    name: 'trtllm_iterations_total', help: 'Executor iterations run', labelNames: ['model', 'version'], registers: [this.registry],
  });

  constructor(private readonly source: MetricsSource, models: readonly string[]) {
    collectDefaultMetrics({ register: this.registry });
    // Every family appears from the first scrape on, at zero, as Triton's do.
    for (const model of models) {
      const l = { model, version: MODEL_VERSION };
      for (const c of [this.success, this.failure, this.count, this.execCount, this.requestUs, this.queueUs, this.inputUs,
        this.inferUs, this.outputUs, this.promptTokens, this.generationTokens]) c.inc(l, 0);
      this.pendingGauge.set(l, 0);
      for (const h of [this.ttft, this.itl, this.e2e, this.queue]) h.zero(l);
    }
    this.iterationSeconds.inc(this.labels, 0);
    this.iterations.inc(this.labels, 0);
    this.refresh();
  }

  /** Listener for Executor.onIterationStats: cumulative counters need every iteration, gauges the latest. */
  readonly onIterationStats = (batch: IterationStats[]): void => {
    if (batch.length === 0) return;
    let seconds = 0;
    for (const s of batch) seconds += s.iterLatencyMs / 1000;
    this.iterationSeconds.inc(this.labels, seconds);
    this.iterations.inc(this.labels, batch.length);
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
    this.request.set({ ...l, request_type: 'active' }, active);
    this.request.set({ ...l, request_type: 'max' }, it?.maxNumActiveRequests ?? 0);
    this.request.set({ ...l, request_type: 'scheduled' }, busy ? it?.inflightBatchingStats.numScheduledRequests ?? 0 : 0);
    this.request.set({ ...l, request_type: 'context' }, busy ? it?.inflightBatchingStats.numContextRequests ?? 0 : 0);
    this.request.set({ ...l, request_type: 'waiting' }, busy ? it?.numQueuedRequests ?? 0 : 0);
    this.memory.set({ ...l, memory_type: 'cpu' }, it?.cpuMemUsage ?? 0);
    this.memory.set({ ...l, memory_type: 'gpu' }, it?.gpuMemUsage ?? 0);
    this.memory.set({ ...l, memory_type: 'pinned' }, 0);
    this.kv.set({ ...l, kv_cache_block_type: 'max' }, live.maxNumBlocks);
    this.kv.set({ ...l, kv_cache_block_type: 'free' }, live.freeNumBlocks);
    this.kv.set({ ...l, kv_cache_block_type: 'used' }, live.usedNumBlocks);
    this.kv.set({ ...l, kv_cache_block_type: 'tokens_per' }, live.tokensPerBlock);
    this.kv.set({ ...l, kv_cache_block_type: 'reused' }, live.reusedBlocks);
    this.kv.set({ ...l, kv_cache_block_type: 'fraction' }, live.maxNumBlocks > 0 ? live.usedNumBlocks / live.maxNumBlocks : 0);
    const ifb = it?.inflightBatchingStats;
    this.ifb.set({ ...l, inflight_batcher_specific_metric: 'micro_batch_id' }, ifb?.microBatchId ?? 0);
    this.ifb.set({ ...l, inflight_batcher_specific_metric: 'generation_requests' }, busy ? ifb?.numGenRequests ?? 0 : 0);
    this.ifb.set({ ...l, inflight_batcher_specific_metric: 'total_context_tokens' }, busy ? ifb?.numCtxTokens ?? 0 : 0);
    this.ifb.set({ ...l, inflight_batcher_specific_metric: 'paused_requests' }, busy ? ifb?.numPausedRequests ?? 0 : 0);
    this.general.set({ ...l, general_type: 'iteration_counter' }, it ? it.iter + 1 : 0);
    this.general.set({ ...l, general_type: 'timestamp' }, it?.timestamp ?? 0);
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
    this.pendingGauge.inc(l);
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
          this.ttft.observe(l, (now - start) / 1000);
          for (let i = 1; i < n; i += 1) this.itl.observe(l, 0);
        } else {
          const gap = (now - last) / 1000 / n;
          for (let i = 0; i < n; i += 1) this.itl.observe(l, gap);
        }
        last = now;
        this.generationTokens.inc(l, n);
      },
      finish: (ok, queueSeconds) => {
        if (done) return;
        done = true;
        const now = performance.now();
        this.pendingGauge.dec(l);
        (ok ? this.success : this.failure).inc(l);
        if (!ok) return;
        this.count.inc(l, inferences);
        this.execCount.inc(l);
        this.e2e.observe(l, (now - start) / 1000);
        this.requestUs.inc(l, Math.round((now - start) * 1000));
        const inputEnd = enqueued || start;
        this.inputUs.inc(l, Math.round((inputEnd - start) * 1000));
        const inferEnd = last || now;
        this.inferUs.inc(l, Math.round(Math.max(0, inferEnd - inputEnd) * 1000));
        this.outputUs.inc(l, Math.round(Math.max(0, now - inferEnd) * 1000));
        if (queueSeconds !== undefined && queueSeconds >= 0) {
          this.queue.observe(l, queueSeconds);
          this.queueUs.inc(l, Math.round(queueSeconds * 1e6));
        }
        this.promptTokens.inc(l, prompt);
      },
    };
  }

  private gauge(name: string, help: string, kind: string): Gauge {
    return new Gauge({ name, help, labelNames: ['model', kind, 'version'], registers: [this.registry] });
  }

  private counter(name: string, help: string): Counter {
    return new Counter({ name, help, labelNames: ['model', 'version'], registers: [this.registry] });
  }

  private histogram(name: string, help: string, buckets: number[]): Histogram {
    return new Histogram({ name, help, labelNames: ['model', 'version'], buckets, registers: [this.registry] });
  }
}
