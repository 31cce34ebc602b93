// `trtllm-launch bench` against a real server: its counts (requests, failures, prompt and output tokens) agree
// with the server's own metrics; --offline runs the same traffic in-process; --check-perf-json gates; bad flags
// and an unreachable URL give clear errors.
import { writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { type BenchOptions, runBench } from '../../../launcher/bench-command/bench-run.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { startTestServer } from '../../helpers/serving.js';
import { tempDir } from '../../helpers/temp-dir.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const dir = tempDir('bench-test-');

function options(url: string, o: Partial<BenchOptions> = {}): BenchOptions {
  return {
    url, protocol: 'http', offline: false, model: fixtureDir('tiny-gpt2'), numRequests: 12, arrivals: 'exponential',
    warmupRequests: 0, inputMean: 16, inputStdev: 4, outputMean: 8, outputStdev: 2, numConversations: 8, numTurns: 4, systemPromptLen: 0,
    seed: 1, endId: -1, json: true, perfTolerance: 0.1, progress: false, ...o,
  };
}

const quiet = { out: () => {}, info: () => {} };

/** The server's counters for the tensorrt_llm model (regex: the default process metrics may read "Nan"). */
async function counters(metricsBase: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name}\\{model="tensorrt_llm",version="1"\\} (\\S+)$`, 'm').exec(text)?.[1]);
  return Object.fromEntries(['nv_inference_request_success', 'nv_inference_request_failure', 'trtllm_prompt_tokens_total',
    'trtllm_generation_tokens_total'].map((n) => [n, read(n)]));
}

t.test('bench over HTTP: counts add up against the server\'s metrics', async (t) => {
  const { base, metricsBase } = await startTestServer(t);
  const before = await counters(metricsBase);
  const { summary } = await runBench('token-norm-dist', options(base, { concurrency: 4, requestRate: 400 }), quiet);
  const after = await counters(metricsBase);
  const delta = (n: string) => after[n]! - before[n]!;
  t.match(summary, { total_requests: 12, successful_requests: 12, failed_requests: 0 });
  t.equal(delta('nv_inference_request_success'), 12, 'server: 12 successes');
  t.equal(delta('trtllm_prompt_tokens_total'), summary.input_tokens, `prompt tokens ${summary.input_tokens}`);
  t.equal(delta('trtllm_generation_tokens_total'), summary.output_tokens, `output tokens ${summary.output_tokens}`);
  t.ok(summary.requests_per_sec > 0 && summary.mean_ttft_ms > 0 && summary.p99_latency_ms >= summary.p90_latency_ms);

  // A dataset with two requests the server must refuse (too long for the model): counted as failures, not hidden.
  const file = join(dir, 'prompts.json');
  writeFileSync(file, JSON.stringify([{ input: 'What is machine learning?', output: 'A way to learn from data.' }, 'Hello there',
    { input: 'The cat is', output_len: 1000 }, { prompt: 'I want you to', output_len: 3 }]));
  const b2 = await counters(metricsBase);
  const lines: string[] = [];
  const ds = await runBench('dataset', options(base, { dataset: file, numRequests: 8, json: false }), { out: (l) => lines.push(l), info: (l) => lines.push(l) });
  const a2 = await counters(metricsBase);
  t.match(ds.summary, { total_requests: 8, successful_requests: 6, failed_requests: 2 });
  t.equal(a2.nv_inference_request_success! - b2.nv_inference_request_success!, 6);
  t.equal(a2.trtllm_generation_tokens_total! - b2.trtllm_generation_tokens_total!, ds.summary.output_tokens);
  const tok = loadTokenizer(fixtureDir('tiny-gpt2'));
  const reference = tok.encode('A way to learn from data.').length - tok.encode('').length;
  t.equal(ds.summary.output_tokens, 2 * (reference + 8 + 3), 'outputs: the reference output\'s tokens, --output-mean (8), output_len (3)');
  const text = lines.join('\n');
  t.match(text, /\| Requests\/Sec +\| +[\d.]+ \|/);
  t.match(text, /\| Total requests +\| +8\.00 \|/);
  t.match(text, /\| TTFT +\| +[\d.]+ \| +[\d.]+ \| +[\d.]+ \|/);
  t.match(text, /\[INFO\] Successful requests: 6, failed requests: 2\n\[WARN\] failed: .*answered 400: .*max_seq_len/);

  // A regression gate that cannot pass, through the command line: exit 1 and the failing figure named.
  const perf = join(dir, 'perf.json');
  writeFileSync(perf, JSON.stringify({ requests_per_sec: 1e9, failed_requests: 0 }));
  const port = new URL(base).port;
  const gate = await execa('node', [bin, 'bench', 'token_norm_dist', '-u', `localhost:${port}`, '--num-requests', '3', '--input-mean', '8',
    '--output-mean', '4', '--json', '--check-perf-json', perf], { reject: false });
  t.equal(gate.exitCode, 1, gate.stderr);
  t.match(JSON.parse(gate.stdout), { total_requests: 3, failed_requests: 0, perf_checks: [{ metric: 'requests_per_sec', ok: false }, { metric: 'failed_requests', ok: true }] });
  t.match(gate.stderr, /\[FAIL\] requests_per_sec: .*\n.*\n\[ERROR\] performance regressed: requests_per_sec/);
});

t.test('bench -i grpc: the same traffic through ModelStreamInfer, counts against the server\'s metrics', async (t) => {
  const { metricsBase, server } = await startTestServer(t, { grpcPort: 0 });
  const url = `127.0.0.1:${server.grpcPort}`;
  const before = await counters(metricsBase);
  const { summary } = await runBench('token-norm-dist', options(url, { protocol: 'grpc', concurrency: 4, requestRate: 400, outputStdev: 0 }), quiet);
  const after = await counters(metricsBase);
  const delta = (n: string) => after[n]! - before[n]!;
  t.match(summary, { total_requests: 12, successful_requests: 12, failed_requests: 0, output_tokens: 96 });
  t.equal(delta('nv_inference_request_success'), 12, 'server: 12 successes');
  t.equal(delta('trtllm_prompt_tokens_total'), summary.input_tokens, `prompt tokens ${summary.input_tokens}`);
  t.equal(delta('trtllm_generation_tokens_total'), 96, 'output tokens');
  t.ok(summary.mean_ttft_ms > 0 && summary.mean_tpot_ms > 0, 'TTFT and TPOT from the streamed responses');
  // A dataset tokenized by the server's preprocessing over gRPC.
  const file = join(dir, 'grpc-prompts.json');
  writeFileSync(file, JSON.stringify(['Hello there', { input: 'The cat is', output_len: 1000 }]));
  const ds = await runBench('dataset', options(url, { protocol: 'grpc', dataset: file, numRequests: 2 }), quiet);
  t.match(ds.summary, { total_requests: 2, successful_requests: 1, failed_requests: 1 }, 'a request the server refuses is a failure');
});

t.test('bench --offline: the same traffic in-process, exact token counts', async (t) => {
  const { summary } = await runBench('token-norm-dist', options('', { offline: true, model: fixtureDir('tiny-llama'), threads: 1, outputStdev: 0, warmupRequests: 1 }), quiet);
  t.match(summary, { total_requests: 12, successful_requests: 12, failed_requests: 0, output_tokens: 96 });
});

t.test('bench --offline --guided-json-schema: every output is checked against the schema', async (t) => {
  const info: string[] = [];
  const schema = join(packageRoot(), 'test', 'fixtures', 'json-schemas', '09-todo-list.json');
  const { summary } = await runBench('token-norm-dist', options('', {
    offline: true, model: join(packageRoot(), 'examples', 'models', 'brown-llama-17m'), threads: 1, outputMean: 40, outputStdev: 0,
    warmupRequests: 1, guidedJsonSchema: schema,
  }), { out: () => {}, info: (line) => info.push(line) });
  t.match(summary, { total_requests: 12, successful_requests: 12, failed_requests: 0 });
  t.ok(info.includes('[INFO] Guided outputs valid under the schema (ajv): 13 of 13'), info.join('\n'));
});

t.test('bad flags and an unreachable URL', async (t) => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  await t.rejects(runBench('token-norm-dist', options(`127.0.0.1:${port}`), quiet), new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}/v2/health/ready \\(ECONNREFUSED\\)`));
  await t.rejects(runBench('token-norm-dist', options(`127.0.0.1:${port}`, { protocol: 'grpc' }), quiet), new RegExp(`cannot reach 127\\.0\\.0\\.1:${port} \\(.*ECONNREFUSED`));
  await t.rejects(runBench('token-norm-dist', options('x:1', { protocol: 'udp' }), quiet), /-i\/--protocol must be http or grpc, got "udp"/);
  await t.rejects(runBench('dataset', options('x:1', { offline: true, dataset: join(dir, 'missing.json') }), quiet), /--dataset .*missing.json cannot be read: ENOENT/);
  const r = await execa('node', [bin, 'bench', 'token-norm-dist', '--num-requests', '0'], { reject: false });
  t.not(r.exitCode, 0);
  t.match(r.stderr, /--num-requests must be an integer >= 1, got "0"/);
});
