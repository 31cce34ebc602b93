// The bench's pure parts: seeded traffic, arrivals, percentiles, the seeds' table, summaries and perf checks.
import t from 'tap';

import { arrivalOffsetsMs } from '../../../launcher/bench-command/arrivals.js';
import { checkPerf } from '../../../launcher/bench-command/check-perf.js';
import { parseSource } from '../../../launcher/bench-command/bench-run.js';
import { seededRandom } from '../../../launcher/bench-command/random.js';
import { parseDataset, tokenNormDist } from '../../../launcher/bench-command/sources.js';
import { mean, median, percentile } from '../../../launcher/bench-command/statistics.js';
import { type RequestRecord, summarize } from '../../../launcher/bench-command/summary.js';
import { formatTable, progressBar, seedsTable } from '../../../launcher/bench-command/table.js';

t.test('percentiles interpolate as numpy does', async (t) => {
  const xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  t.equal(percentile(xs, 90), 9.1);   // numpy.percentile(range(1, 11), 90)
  t.ok(Math.abs(percentile(xs, 99) - 9.91) < 1e-12);
  t.equal(median([3, 1, 2]), 2);
  t.equal(median([4, 1, 2, 3]), 2.5);
  t.equal(mean([]), 0);
  t.equal(percentile([], 99), 0, 'no samples: 0, not NaN');
  // The definition every bench/ script shares (numpy's 'linear'), at its edges.
  const unsorted = [30, 10, 20, 40];
  t.equal(percentile(unsorted, 0), 10, 'p0 is the smallest');
  t.equal(percentile(unsorted, 100), 40, 'p100 is the largest');
  t.equal(percentile(unsorted, 50), 25, 'between the two middle samples');
  t.equal(percentile(unsorted, 90), 37, 'numpy.percentile([10, 20, 30, 40], 90)');
  t.same(unsorted, [30, 10, 20, 40], 'the samples are not reordered');
  t.equal(percentile([7], 99), 7, 'one sample is every percentile');
});

t.test('token-norm-dist: seeded, within the vocabulary, exact lengths at stdev 0', async (t) => {
  const d = { numRequests: 50, inputMean: 20, inputStdev: 0, outputMean: 7, outputStdev: 0, vocabSize: 100, seed: 3 };
  const a = tokenNormDist(d);
  t.same(a, tokenNormDist(d), 'same seed, same traffic');
  t.notSame(a, tokenNormDist({ ...d, seed: 4 }));
  t.ok(a.every((r) => r.inputIds.length === 20 && r.outputLen === 7));
  t.ok(a.every((r) => r.inputIds.every((id) => Number.isInteger(id) && id >= 0 && id < 100)));
  const spread = tokenNormDist({ ...d, numRequests: 2000, inputStdev: 5 }).map((r) => r.inputIds.length);
  t.ok(Math.abs(mean(spread) - 20) < 0.5, `mean length ${mean(spread)}`);
});

t.test('arrivals: none, constant, exponential (Poisson at the rate)', async (t) => {
  t.same(arrivalOffsetsMs(3, undefined, 'exponential', seededRandom(1)), [0, 0, 0]);
  t.same(arrivalOffsetsMs(3, 4, 'constant', seededRandom(1)), [0, 250, 500]);
  const exp = arrivalOffsetsMs(4001, 10, 'exponential', seededRandom(1));
  t.ok(Math.abs(exp[4000]! / 4000 - 100) < 5, `mean gap ${exp[4000]! / 4000} ms at 10 req/s`);
});

t.test('dataset formats and their errors', async (t) => {
  t.same(parseDataset(['a', { input: 'b', output: 'c' }, { prompt: 'd', output_len: 4 }], 'f.json'), [
    { prompt: 'a' }, { prompt: 'b', output: 'c' }, { prompt: 'd', outputLen: 4 }]);
  t.same(parseDataset({ samples: [{ conversations: [{ from: 'human', value: 'q' }, { from: 'gpt', value: 'r' }] }] }, 'f'), [{ prompt: 'q', output: 'r' }]);
  t.throws(() => parseDataset([], 'f.json'), /--dataset f.json must hold a non-empty JSON list/);
  t.throws(() => parseDataset([{ nope: 1 }], 'f.json'), /entry 0 has no prompt/);
  t.equal(parseSource('token_norm_dist'), 'token-norm-dist');
  t.equal(parseSource('multi_turn'), 'multi-turn');
  t.throws(() => parseSource('random'), /the source must be token-norm-dist, dataset or multi-turn, got "random"/);
});

const rec = (ok: boolean, start: number, chunks: number[], out: number, end: number): RequestRecord =>
  ({ ok, inputTokens: 10, outputTokens: out, startMs: start, endMs: end, chunkTimesMs: chunks, ...(ok ? {} : { error: 'boom' }) });

t.test('summary: failures counted apart, TTFT / TPOT / ITL', async (t) => {
  const s = summarize([rec(true, 0, [10, 20, 30], 3, 30), rec(true, 0, [20, 40], 2, 40), rec(false, 0, [], 0, 5)]);
  t.match(s, { total_requests: 3, successful_requests: 2, failed_requests: 1, input_tokens: 20, output_tokens: 5, total_latency_ms: 40 });
  t.equal(s.requests_per_sec, 50);
  t.equal(s.output_tokens_per_sec, 125);
  t.equal(s.mean_ttft_ms, 15);
  t.equal(s.mean_tpot_ms, 15, '(30-10)/2 and (40-20)/1');
  t.same([s.mean_itl_ms, s.median_itl_ms], [(10 + 10 + 20) / 3, 10]);
  t.same(s.errors, ['boom']);
});

t.test("the seeds' table, row for row", async (t) => {
  const s = summarize([rec(true, 0, [10], 2, 100)]);
  const lines = seedsTable(s).split('\n');
  t.equal(lines[0], '+----------------------------+--------+');
  t.equal(lines[1], '| Stat                       | Value  |');
  t.same(lines.slice(3, 12).map((l) => l.split('|')[1]!.trim()), ['Requests/Sec', 'OP tokens/sec', 'Avg. latency (ms)',
    'P99 latency (ms)', 'P90 latency (ms)', 'Avg. IP tokens per request', 'Avg. OP tokens per request', 'Total latency (ms)', 'Total requests']);
  t.equal(lines[3], '| Requests/Sec               |  10.00 |');
  t.equal(lines[11], '| Total requests             |   1.00 |');
  t.equal(formatTable(['a', 'b'], [['x', 1.5]]), '+---+------+\n| a | b    |\n+---+------+\n| x | 1.50 |\n+---+------+');
  t.equal(progressBar(1, 4, 8), '[##......] 1/4');
});

t.test('--check-perf-json: directions, tolerances, unknown names', async (t) => {
  const s = summarize([rec(true, 0, [10], 2, 100)]);   // 10 req/s, 100 ms
  const checks = checkPerf(s, { tolerance: 0.1, requests_per_sec: 10.5, p99_latency_ms: { value: 80, tolerance: 0.5 }, failed_requests: 0 }, 'p.json', 0.2);
  t.same(checks.map((c) => [c.metric, c.ok]), [['requests_per_sec', true], ['p99_latency_ms', true], ['failed_requests', true]]);
  t.same(checkPerf(s, { requests_per_sec: 20, p99_latency_ms: 50 }, 'p.json', 0.1).map((c) => c.ok), [false, false]);
  t.throws(() => checkPerf(s, { total_requests: 3 }, 'p.json', 0.1), /"total_requests" is not a checkable figure/);
  t.throws(() => checkPerf(s, { requests_per_sec: 'x' }, 'p.json', 0.1), /"requests_per_sec" must be a number or \{"value": n, "tolerance": t\}/);
});
