// A benchmark run's figures from its per-request records (pure): benchmark_core_model's stats and vLLM
// bench serve's TTFT / TPOT / ITL / end-to-end spreads. Failed requests are counted apart and never enter the
// latency or token figures, so a run that fails half its requests cannot look fast. Multi-turn runs add per-turn
// figures (summarizeTurns).
import { mean, percentile, type Spread, spread } from './statistics.js';

export interface RequestRecord {
  ok: boolean;
  error?: string;
  inputTokens: number;
  outputTokens: number;
  startMs: number;             // when it was sent, from the run's start
  endMs: number;               // when its last response arrived
  chunkTimesMs: number[];      // when each response carrying tokens arrived
  conversation?: number;       // multi-turn: which conversation, which turn (from 0), and the prompt tokens
  turn?: number;               // no earlier request had (its own system prompt's first sending, or
  newInputTokens?: number;     // the new user message)
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

/** One turn index's figures across the conversations (turn from 1, as people count them). */
export interface TurnFigures {
  turn: number;
  requests: number;              // sent, successful or not
  failed_requests: number;
  avg_input_tokens: number;
  avg_new_input_tokens: number;
  p50_ttft_ms: number;
  p90_ttft_ms: number;
}

/**
 * What multi-turn traffic adds to the summary: TTFT of first turns against later turns (where a prefix cache pays),
 * and how many of the prompt tokens were new — not in an earlier prompt or answer of the conversation nor in a
 * system prompt already sent — which is all a perfect prefix cache would still compute.
 */
export interface TurnSummary {
  num_conversations: number;
  turns_per_conversation: number;
  unsent_turns: number;              // after a failed turn of their conversation
  first_turn_p50_ttft_ms: number;
  first_turn_p90_ttft_ms: number;
  later_turns_p50_ttft_ms: number;
  later_turns_p90_ttft_ms: number;
  new_input_tokens: number;          // successful turns, as input_tokens
  reusable_input_tokens: number;     // input_tokens − new_input_tokens
  reusable_input_fraction: number;
  turns: TurnFigures[];
}

const ttftOf = (r: RequestRecord) => r.chunkTimesMs[0]! - r.startMs;

export function summarizeTurns(records: readonly RequestRecord[], numConversations: number, turnsPerConversation: number): TurnSummary {
  const ok = records.filter((r) => r.ok);
  const ttfts = (rs: readonly RequestRecord[]) => rs.filter((r) => r.chunkTimesMs.length > 0).map(ttftOf);
  const first = ttfts(ok.filter((r) => r.turn === 0));
  const later = ttfts(ok.filter((r) => (r.turn ?? 0) > 0));
  const inputTokens = ok.reduce((a, r) => a + r.inputTokens, 0);
  const newInputTokens = ok.reduce((a, r) => a + (r.newInputTokens ?? r.inputTokens), 0);
  const turns = Array.from({ length: turnsPerConversation }, (_, k): TurnFigures => {
    const sent = records.filter((r) => r.turn === k);
    const good = sent.filter((r) => r.ok);
    const t = ttfts(good);
    return {
      turn: k + 1,
      requests: sent.length,
      failed_requests: sent.length - good.length,
      avg_input_tokens: mean(good.map((r) => r.inputTokens)),
      avg_new_input_tokens: mean(good.map((r) => r.newInputTokens ?? r.inputTokens)),
      p50_ttft_ms: percentile(t, 50),
      p90_ttft_ms: percentile(t, 90),
    };
  });
  return {
    num_conversations: numConversations,
    turns_per_conversation: turnsPerConversation,
    unsent_turns: numConversations * turnsPerConversation - records.length,
    first_turn_p50_ttft_ms: percentile(first, 50),
    first_turn_p90_ttft_ms: percentile(first, 90),
    later_turns_p50_ttft_ms: percentile(later, 50),
    later_turns_p90_ttft_ms: percentile(later, 90),
    new_input_tokens: newInputTokens,
    reusable_input_tokens: inputTokens - newInputTokens,
    reusable_input_fraction: inputTokens === 0 ? 0 : (inputTokens - newInputTokens) / inputTokens,
    turns,
  };
}
