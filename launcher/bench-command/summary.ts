// A benchmark run's figures from its per-request records (pure): benchmark_core_model's stats and vLLM
// bench serve's TTFT / TPOT / ITL / end-to-end spreads. Failed requests are counted apart and never enter the
// latency or token figures, so a run that fails half its requests cannot look fast.
import { mean, percentile, type Spread, spread } from './statistics.js';

export interface RequestRecord {
  ok: boolean;
  error?: string;
  inputTokens: number;
  outputTokens: number;
  startMs: number;             // when it was sent, from the run's start
  endMs: number;               // when its last response arrived
  chunkTimesMs: number[];      // when each response carrying tokens arrived
}

export interface BenchSummary {
  total_requests: number;
  successful_requests: number;
  failed_requests: number;
  total_latency_ms: number;        // first send to last completion
  total_request_latencies_ms: number;
  requests_per_sec: number;
  output_tokens_per_sec: number;
  input_tokens: number;
  output_tokens: number;
  avg_input_tokens: number;
  avg_output_tokens: number;
  avg_latency_ms: number;
  p90_latency_ms: number;
  p99_latency_ms: number;
  mean_ttft_ms: number; median_ttft_ms: number; p99_ttft_ms: number;
  mean_tpot_ms: number; median_tpot_ms: number; p99_tpot_ms: number;
  mean_itl_ms: number; median_itl_ms: number; p99_itl_ms: number;
  mean_e2e_latency_ms: number; median_e2e_latency_ms: number; p99_e2e_latency_ms: number;
  errors: string[];                // distinct failure messages, first few
}

const spreadFields = (name: string, s: Spread) => ({ [`mean_${name}_ms`]: s.mean, [`median_${name}_ms`]: s.median, [`p99_${name}_ms`]: s.p99 });

export function summarize(records: readonly RequestRecord[]): BenchSummary {
  const ok = records.filter((r) => r.ok);
  const latencies = ok.map((r) => r.endMs - r.startMs);
  const start = records.length === 0 ? 0 : Math.min(...records.map((r) => r.startMs));
  const end = records.length === 0 ? 0 : Math.max(...records.map((r) => r.endMs));
  const duration = end - start;
  const inputTokens = ok.reduce((a, r) => a + r.inputTokens, 0);
  const outputTokens = ok.reduce((a, r) => a + r.outputTokens, 0);
  const ttft = ok.filter((r) => r.chunkTimesMs.length > 0).map((r) => r.chunkTimesMs[0]! - r.startMs);
  // TPOT: decode time per token after the first, for requests with more than one token (vLLM's definition).
  const tpot = ok.filter((r) => r.outputTokens > 1 && r.chunkTimesMs.length > 0)
    .map((r) => (r.endMs - r.chunkTimesMs[0]!) / (r.outputTokens - 1));
  const itl = ok.flatMap((r) => r.chunkTimesMs.slice(1).map((t, i) => t - r.chunkTimesMs[i]!));
  const perSec = (n: number) => (duration > 0 ? (1000 * n) / duration : 0);
  return {
    total_requests: records.length,
    successful_requests: ok.length,
    failed_requests: records.length - ok.length,
    total_latency_ms: duration,
    total_request_latencies_ms: latencies.reduce((a, b) => a + b, 0),
    requests_per_sec: perSec(ok.length),
    output_tokens_per_sec: perSec(outputTokens),
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    avg_input_tokens: ok.length === 0 ? 0 : inputTokens / ok.length,
    avg_output_tokens: ok.length === 0 ? 0 : outputTokens / ok.length,
    avg_latency_ms: mean(latencies),
    p90_latency_ms: percentile(latencies, 90),
    p99_latency_ms: percentile(latencies, 99),
    ...spreadFields('ttft', spread(ttft)),
    ...spreadFields('tpot', spread(tpot)),
    ...spreadFields('itl', spread(itl)),
    ...spreadFields('e2e_latency', spread(latencies)),
    errors: [...new Set(records.filter((r) => !r.ok).map((r) => r.error ?? 'unknown error'))].slice(0, 5),
  } as BenchSummary;
}
