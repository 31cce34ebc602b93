// The bench's printed output (pure): benchmark_core_model's Stat/Value table, row for row, and a
// Mean/Median/P99 table of TTFT, TPOT, ITL and end-to-end latency as vLLM's bench serve reports them; multi-turn
// runs add a table per turn and the prompt tokens a perfect prefix cache would skip.
import type { BenchSummary, TurnSummary } from './summary.js';

/** A psql-style box table (as Python's tabulate prints it): text left-aligned, numbers right-aligned. */
export function formatTable(headers: string[], rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'number' ? c.toFixed(2) : c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const rule = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  const line = (r: string[], numeric: boolean[]) => `| ${r.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const out = [rule, line(headers, headers.map(() => false)), rule];
  for (const [k, r] of cells.entries()) out.push(line(r, rows[k]!.map((c) => typeof c === 'number')));
  out.push(rule);
  return out.join('\n');
}

/** The seeds' table, with their row names in their order. */
export function seedsTable(s: BenchSummary): string {
  return formatTable(['Stat', 'Value'], [
    ['Requests/Sec', s.requests_per_sec],
    ['OP tokens/sec', s.output_tokens_per_sec],
    ['Avg. latency (ms)', s.avg_latency_ms],
    ['P99 latency (ms)', s.p99_latency_ms],
    ['P90 latency (ms)', s.p90_latency_ms],
    ['Avg. IP tokens per request', s.avg_input_tokens],
    ['Avg. OP tokens per request', s.avg_output_tokens],
    ['Total latency (ms)', s.total_latency_ms],
    ['Total requests', s.total_requests],
  ]);
}

export function latencyTable(s: BenchSummary): string {
  return formatTable(['Latency (ms)', 'Mean', 'Median', 'P99'], [
    ['TTFT', s.mean_ttft_ms, s.median_ttft_ms, s.p99_ttft_ms],
    ['TPOT', s.mean_tpot_ms, s.median_tpot_ms, s.p99_tpot_ms],
    ['ITL', s.mean_itl_ms, s.median_itl_ms, s.p99_itl_ms],
    ['E2E latency', s.mean_e2e_latency_ms, s.median_e2e_latency_ms, s.p99_e2e_latency_ms],
  ]);
}

/** Multi-turn: a row per turn, then first turns against later ones (counts as text: they are whole). */
export function turnsTable(m: TurnSummary): string {
  const later = m.turns.slice(1);
  const sum = (f: (t: TurnSummary['turns'][number]) => number) => later.reduce((a, t) => a + f(t), 0);
  const laterOk = sum((t) => t.requests - t.failed_requests);
  const laterAvg = (f: (t: TurnSummary['turns'][number]) => number) => (laterOk === 0 ? 0 : sum((t) => f(t) * (t.requests - t.failed_requests)) / laterOk);
  const rows: (string | number)[][] = m.turns.map((t) => [`Turn ${t.turn}`, String(t.requests), String(t.failed_requests), t.avg_input_tokens,
    t.avg_new_input_tokens, t.p50_ttft_ms, t.p90_ttft_ms]);
  if (later.length > 0) {
    rows.push([later.length === 1 ? 'Later turn (2)' : `Later turns (2-${m.turns.length})`, String(sum((t) => t.requests)), String(sum((t) => t.failed_requests)),
      laterAvg((t) => t.avg_input_tokens), laterAvg((t) => t.avg_new_input_tokens), m.later_turns_p50_ttft_ms, m.later_turns_p90_ttft_ms]);
  }
  return formatTable(['Turn', 'Requests', 'Failed', 'Avg. IP tokens', 'Avg. new IP tokens', 'TTFT P50 (ms)', 'TTFT P90 (ms)'], rows);
}

/** Everything a person reads at the end of a run: the seeds' [INFO] lines, the tables, and the failures. */
export function report(s: BenchSummary, turns?: TurnSummary): string {
  const lines = [
    `[INFO] Total Latency: ${s.total_latency_ms.toFixed(3)} ms`,
    `[INFO] Total request latencies: ${s.total_request_latencies_ms.toFixed(3)} ms`,
    seedsTable(s),
    latencyTable(s),
  ];
  if (turns !== undefined) {
    lines.push(
      `[INFO] Multi-turn: ${turns.num_conversations} conversations x ${turns.turns_per_conversation} turns` +
        (turns.unsent_turns > 0 ? `, ${turns.unsent_turns} turns not sent (their conversation had a failed turn)` : ''),
      turnsTable(turns),
      `[INFO] Prompt tokens: ${s.input_tokens}, new: ${turns.new_input_tokens}; a perfect prefix cache skips ${turns.reusable_input_tokens} ` +
        `(${(100 * turns.reusable_input_fraction).toFixed(1)}%)`,
    );
  }
  lines.push(`[INFO] Successful requests: ${s.successful_requests}, failed requests: ${s.failed_requests}`);
  for (const e of s.errors) lines.push(`[WARN] failed: ${e}`);
  return lines.join('\n');
}

/** A one-line progress bar for stderr. */
export function progressBar(done: number, total: number, width = 30): string {
  const filled = total === 0 ? width : Math.round((width * done) / total);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}
