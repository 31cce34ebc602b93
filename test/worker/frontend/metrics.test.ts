// The metrics port: a scrape parses as Prometheus text and carries Triton's families and labels, fed by real
// iterations, plus our latency histograms and token counters.
import t from 'tap';

import { parsePrometheus, postJson, postSse, startTestServer } from '../../helpers/serving.js';

t.test('metrics scrape: Triton families and labels, latency histograms, token counts', async (t) => {
  const { base, metricsBase } = await startTestServer(t);
  await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'What is machine learning?', max_tokens: 8 });
  await postSse(`${base}/v2/models/ensemble/generate_stream`, { text_input: 'Hello', max_tokens: 5 });
  await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'x', max_tokens: 0 });
  const res = await fetch(`${metricsBase}/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/plain/);
  const { types, samples } = parsePrometheus(await res.text());
  const find = (name: string, labels: Record<string, string>) => samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  const triton: [string, string, string[]][] = [
    ['nv_trt_llm_request_metrics', 'request_type', ['active', 'max', 'scheduled', 'context', 'waiting']],
    ['nv_trt_llm_runtime_memory_metrics', 'memory_type', ['cpu', 'gpu', 'pinned']],
    ['nv_trt_llm_kv_cache_block_metrics', 'kv_cache_block_type', ['max', 'free', 'used', 'tokens_per', 'reused', 'fraction']],
    ['nv_trt_llm_inflight_batcher_metrics', 'inflight_batcher_specific_metric', ['micro_batch_id', 'generation_requests', 'total_context_tokens', 'paused_requests']],
    ['nv_trt_llm_general_metrics', 'general_type', ['iteration_counter', 'timestamp']],
  ];
  for (const [family, label, values] of triton) {
    t.equal(types.get(family), 'gauge', `${family} is a gauge`);
    for (const v of values) t.ok(find(family, { model: 'tensorrt_llm', version: '1', [label]: v }), `${family}{${label}="${v}"}`);
  }
  t.equal(find('nv_trt_llm_kv_cache_block_metrics', { kv_cache_block_type: 'tokens_per' })?.value, 16);
  t.ok(find('nv_trt_llm_general_metrics', { general_type: 'iteration_counter' })!.value >= 13, 'iterations counted');
  t.ok(find('nv_trt_llm_general_metrics', { general_type: 'timestamp' })!.value > 1.6e9, 'a unix timestamp');
  const kvMax = find('nv_trt_llm_kv_cache_block_metrics', { kv_cache_block_type: 'max' })!.value;
  t.equal(find('nv_trt_llm_kv_cache_block_metrics', { kv_cache_block_type: 'free' })!.value, kvMax, 'idle: all blocks free');
  for (const name of ['nv_inference_request_success', 'nv_inference_request_failure', 'nv_inference_count', 'nv_inference_exec_count',
    'nv_inference_request_duration_us', 'nv_inference_queue_duration_us', 'nv_inference_compute_input_duration_us',
    'nv_inference_compute_infer_duration_us', 'nv_inference_compute_output_duration_us']) {
    t.equal(types.get(name), 'counter', `${name} is a counter`);
    for (const model of ['ensemble', 'tensorrt_llm', 'tensorrt_llm_bls', 'preprocessing', 'postprocessing']) {
      t.ok(find(name, { model, version: '1' }), `${name}{model="${model}"}`);
    }
  }
  t.equal(types.get('nv_inference_pending_request_count'), 'gauge');
  t.equal(find('nv_inference_request_success', { model: 'ensemble' })?.value, 2);
  t.ok(find('nv_inference_request_duration_us', { model: 'ensemble' })!.value > 0);
  for (const name of ['trtllm_time_to_first_token_seconds', 'trtllm_inter_token_latency_seconds', 'trtllm_e2e_request_latency_seconds', 'trtllm_request_queue_time_seconds']) {
    t.equal(types.get(name), 'histogram', `${name} is a histogram`);
    t.ok(find(`${name}_count`, { model: 'ensemble', version: '1' }), `${name}_count`);
    t.ok(find(`${name}_bucket`, { model: 'ensemble', le: '+Inf' }), `${name}_bucket{le="+Inf"}`);
  }
  t.equal(find('trtllm_time_to_first_token_seconds_count', { model: 'ensemble' })?.value, 2, 'one TTFT per served request');
  t.equal(find('trtllm_inter_token_latency_seconds_count', { model: 'ensemble' })?.value, 7 + 4, 'an ITL per later token');
  t.equal(find('trtllm_generation_tokens_total', { model: 'ensemble' })?.value, 13);
  t.ok(find('trtllm_prompt_tokens_total', { model: 'ensemble' })!.value > 0);
  t.equal(types.get('trtllm_iteration_seconds_total'), 'counter');
  t.ok(find('process_cpu_seconds_total', {}), 'process CPU time (for the overhead benchmark)');
  t.equal((await fetch(`${metricsBase}/nope`)).status, 404);
});

t.test('metrics behind the API key when asked', async (t) => {
  const { metricsBase } = await startTestServer(t, { apiKey: 'k', authMetrics: true });
  t.equal((await fetch(`${metricsBase}/metrics`)).status, 401);
  t.equal((await fetch(`${metricsBase}/metrics`, { headers: { authorization: 'Bearer k' } })).status, 200);
});
