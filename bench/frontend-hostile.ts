// One client must never stall the server (issue 23): the p99 latency of GET /v2/health/ready, probed every
// --interval-ms from this process, while one hostile client (bench/programs/hostile-client.ts, a process of its own) sends, one
// request after another for --seconds each:
//   (a) a maximal prompt: ensemble generate with text_input filling --max-body-bytes; (a0), the same body sent to a
//       route that does not exist (404, the body read and dropped), tells what moving 8 MiB into the server costs
//       the health checks on this machine from what handling it costs;
//   (b) a maximal fan-out: /v1/completions with the largest prompt list x n the server accepts (from
//       --fanout-prompts x --fanout-n, halved until the server says 200);
//   (c) a maximal logits request: tensorrt_llm generate with return_context_logits and as many input ids as fit in
//       --logits-bytes (default: the server's default --max-logits-bytes-per-request), as JSON; (c0), the same
//       request without logits, tells the engine's share (a long prefill) from the logits' own, and (c, binary) the
//       same logits through /infer as binary data tells what printing them as JSON costs; (c, binary, bare) sends
//       the same request to a bare node:http process answering as many bytes (bench/programs/bare-answer-server.ts):
//       the floor of moving that answer through Node and loopback here.
// Baseline in the same run: the same probes against the idle server (before the phases, and again after them as a
// drift check). Figures: p50 / p99 / max health latency, p99 / idle p99 (goal <= 2x), and the server's RSS before
// each phase and its peak during it (VmHWM, reset before each phase). The model: a dummy Llama with a --vocab
// vocabulary (the tiny Llama fixture's tokenizer, whose ids it covers) so that logits have a real model's size.
//   node dist/bench/frontend-hostile.js [--samples 2000] [--interval-ms 5] [--seconds 20] [--vocab 32000] [--logits-bytes <n>]
//     [--fanout-prompts 1024] [--fanout-n 16] [--max-body-bytes 8388608] [--only a0,a,b,c0,c,cbin,cbare] [--server-root <checkout>]
// --server-root runs the server of another checkout (built, e.g. the commit before a change) for a before/after.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { percentile } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';
import { DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST } from '../worker/frontend/logits-budget.js';
import { BENCH_SHAPE, writeDummyLlama } from './dummy-checkpoint.js';
import { startServeProcess } from './serve-process.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const SAMPLES = Number(arg('samples', '2000'));          // idle probes
const INTERVAL_MS = Number(arg('interval-ms', '5'));     // one probe every this many ms
const SECONDS = Number(arg('seconds', '20'));            // each hostile phase
const VOCAB = Number(arg('vocab', '32000'));
const LOGITS_BYTES = Number(arg('logits-bytes', String(DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST)));
const FANOUT_PROMPTS = Number(arg('fanout-prompts', '1024'));
const FANOUT_N = Number(arg('fanout-n', '16'));
const MAX_BODY_BYTES = Number(arg('max-body-bytes', String(8 * 1024 * 1024)));
const ONLY = new Set(arg('only', 'a0,a,b,c0,c,cbin,cbare').split(','));
const SERVER_ROOT = arg('server-root', packageRoot());
const MAX_POSITIONS = 4096;
const FIXTURE = join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama');

/** A small Llama (fast forward passes) with a real model's vocabulary, and a tokenizer whose ids it covers. */
function benchModel(): string {
  const dir = join(packageRoot(), 'build', 'bench-models', `llama-hostile-v${VOCAB}`);
  writeDummyLlama(dir, { ...BENCH_SHAPE, vocabSize: VOCAB, hiddenSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 256, maxPositionEmbeddings: MAX_POSITIONS });
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) {
    if (!existsSync(join(dir, file))) copyFileSync(join(FIXTURE, file), join(dir, file));
  }
  return dir;
}

interface Server { child: ChildProcess; base: string; name: string }

async function startServer(model: string): Promise<Server> {
  const { child, out } = await startServeProcess(SERVER_ROOT, ['--model', model, '--http-port', '0', '--grpc-port', '0',
    '--metrics-port', '0', '--threads', '1', '--host', '127.0.0.1', '--log-level', 'warn', '--max-body-bytes', String(MAX_BODY_BYTES)]);
  return {
    child,
    base: `http://127.0.0.1:${/HTTPService at [^:]+:(\d+)/.exec(out)![1]}`,
    name: /model "([^"]+)"/.exec(out)?.[1] ?? 'ensemble',
  };
}

async function startBareServer(answerBytes: number): Promise<Server> {
  const child = spawn('node', [join(packageRoot(), 'dist', 'bench', 'programs', 'bare-answer-server.js'), String(answerBytes)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => { out += c.toString(); const m = /listening (\d+)/.exec(out); if (m) resolve(m[1]!); });
    child.once('exit', (code) => reject(new Error(`bare-answer-server exited with ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  await probeUntil(base, () => true, 200);  // warm, as ours
  return { child, base, name: 'bare' };
}

// /proc/<pid>/status in kB → bytes; clear_refs 5 resets the peak (VmHWM) to the current RSS.
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

// Probes go out on a fixed clock, as a load balancer's do, whether or not the last one was answered: a server that
// stalls for a second then owes 1000 / --interval-ms late answers, and the p99 shows the stall (a closed loop would
// take a single sample of it). Up to 64 probes in flight, each on a kept-alive connection.
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

function probe(base: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    get(`${base}/v2/health/ready`, { agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`health: HTTP ${res.statusCode}`))));
    }).on('error', reject);
  });
}

/** Probes every --interval-ms until `done` says stop (and at least `min` of them); each one's latency in ms. */
async function probeUntil(base: string, done: () => boolean, min = 1): Promise<number[]> {
  const out: number[] = [];
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  for (let k = 0; k < min || !done(); k += 1) {
    const wait = start + k * INTERVAL_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    inFlight.push(probe(base).then((ms) => { out.push(ms); }));
  }
  await Promise.all(inFlight);
  return out;
}

async function post(base: string, path: string, body: unknown): Promise<number> {
  const res = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  await res.arrayBuffer();
  return res.status;
}

interface Phase { name: string; what: string; path: string; body: unknown; target?: Server }

interface Outcome { latencies: number[]; rssBefore: number; peak: number; client: Record<string, unknown> }

async function runPhase(ours: Server, phase: Phase): Promise<Outcome> {
  const server = phase.target ?? ours;
  const pid = server.child.pid!;
  const bodyFile = join(tmpdir(), `hostile-${process.pid}-${phase.name}.json`);
  writeFileSync(bodyFile, JSON.stringify(phase.body));
  const rssBefore = memory(pid).rss;
  resetPeak(pid);
  const client = spawn('node', [join(packageRoot(), 'dist', 'bench', 'programs', 'hostile-client.js'), server.base, phase.path, bodyFile, String(SECONDS)],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let exited = false;
  const ended = new Promise<void>((resolve) => client.once('exit', () => { exited = true; resolve(); }));
  await new Promise<void>((resolve) => client.stdout!.on('data', (c: Buffer) => { out += c.toString(); if (out.includes('started')) resolve(); }));
  const latencies = await probeUntil(server.base, () => exited, 20);
  await ended;
  const summary = JSON.parse(out.split('\n').filter((l) => l.startsWith('{')).at(-1) ?? '{}') as Record<string, unknown>;
  return { latencies, rssBefore, peak: memory(pid).peak, client: summary };
}

/** The largest prompts x n of a completions request the server answers 200, halving from the asked-for sizes. */
async function largestFanout(server: Server): Promise<{ prompts: number; n: number }> {
  let prompts = FANOUT_PROMPTS;
  let n = FANOUT_N;
  for (;;) {
    const status = await post(server.base, '/v1/completions', fanoutBody(server, prompts, n));
    if (status === 200 || (prompts === 1 && n === 1)) return { prompts, n };
    if (prompts >= n && prompts > 1) prompts = Math.floor(prompts / 2);
    else n = Math.max(1, Math.floor(n / 2));
  }
}

function fanoutBody(server: Server, prompts: number, n: number): unknown {
  return { model: server.name, prompt: Array.from({ length: prompts }, (_, i) => `Question ${i}: what is machine learning?`), n, max_tokens: 1, temperature: 0 };
}

function maximalPrompt(): unknown {
  const sentence = 'The quick brown fox jumps over the lazy dog while the server keeps answering. ';
  const room = MAX_BODY_BYTES - JSON.stringify({ text_input: '', max_tokens: 1 }).length - 16;
  return { text_input: sentence.repeat(Math.ceil(room / sentence.length)).slice(0, room), max_tokens: 1 };
}

function maximalLogits(): { body: unknown; ids: number } {
  const ids = Math.min(Math.floor(LOGITS_BYTES / (VOCAB * 4)), MAX_POSITIONS - 1);
  return { ids, body: { input_ids: Array.from({ length: ids }, (_, i) => 1 + (i % 500)), request_output_len: 1, return_context_logits: true } };
}

const ms = (x: number) => x.toFixed(2);
const mib = (x: number) => (x / 2 ** 20).toFixed(0);

async function main(): Promise<void> {
  const model = benchModel();
  const server = await startServer(model);
  const pid = server.child.pid!;
  let bare: Server | undefined;
  try {
    await probeUntil(server.base, () => true, 200);  // warm the connections and the route
    const idle = await probeUntil(server.base, () => true, SAMPLES);
    const idleRss = memory(pid).rss;
    const idleP99 = percentile(idle, 99);
    const rows: string[][] = [[`idle (${idle.length} probes)`, ms(percentile(idle, 50)), ms(idleP99), ms(Math.max(...idle)), '1.00×', mib(idleRss), '', '']];
    const phases: Phase[] = [];
    if (ONLY.has('a0')) phases.push({ name: 'a0', what: `(a0) control for (a): the same body to a route that does not exist (404)`, path: '/v2/models/ensemble/no-such-route', body: maximalPrompt() });
    if (ONLY.has('a')) phases.push({ name: 'a', what: `(a) maximal prompt: ensemble generate, text_input ${MAX_BODY_BYTES} bytes`, path: '/v2/models/ensemble/generate', body: maximalPrompt() });
    if (ONLY.has('b')) {
      const { prompts, n } = await largestFanout(server);
      phases.push({ name: 'b', what: `(b) maximal fan-out: /v1/completions, ${prompts} prompts x n ${n}`, path: '/v1/completions', body: fanoutBody(server, prompts, n) });
    }
    if (ONLY.has('c0')) {
      const { body, ids } = maximalLogits();
      phases.push({ name: 'c0', what: `(c0) control for (c): the same ${ids} input ids without logits`, path: '/v2/models/tensorrt_llm/generate', body: { ...(body as object), return_context_logits: false } });
    }
    if (ONLY.has('c')) {
      const { body, ids } = maximalLogits();
      phases.push({ name: 'c', what: `(c) maximal logits: tensorrt_llm generate, ${ids} input ids x vocab ${VOCAB} context logits (${ids * VOCAB * 4} bytes)`, path: '/v2/models/tensorrt_llm/generate', body });
    }
    if (ONLY.has('cbin')) {
      const { ids } = maximalLogits();
      const tensor = (name: string, datatype: string, data: unknown[]) => ({ name, datatype, shape: [1, data.length], data });
      phases.push({
        name: 'cbin', what: `(c, binary) the same logits through /infer as binary data (binary_data_output)`, path: '/v2/models/tensorrt_llm/infer',
        body: {
          inputs: [tensor('input_ids', 'INT32', Array.from({ length: ids }, (_, i) => 1 + (i % 500))), tensor('request_output_len', 'INT32', [1]), tensor('return_context_logits', 'BOOL', [true])],
          parameters: { binary_data_output: true },
        },
      });
    }
    if (ONLY.has('cbare')) {
      const { body, ids } = maximalLogits();
      bare = await startBareServer(ids * VOCAB * 4);
      phases.push({ name: 'cbare', what: `(c, binary, bare) control: a bare node:http process answering each request with ${ids * VOCAB * 4} bytes`, path: '/', body, target: bare });
    }
    for (const phase of phases) {
      const o = await runPhase(server, phase);
      const p99 = percentile(o.latencies, 99);
      const statuses = Object.entries((o.client.statuses ?? {}) as Record<string, number>).map(([s, k]) => `${k}× ${s}`).join(', ');
      const answered = `${o.client.requests ?? 0} requests (${statuses}${o.client.error ? `; ${String(o.client.error)}` : ''}), ${mib(Number(o.client.bytes ?? 0))} MiB read`;
      rows.push([`${phase.what} (${o.latencies.length} probes)`, ms(percentile(o.latencies, 50)), ms(p99), ms(Math.max(...o.latencies)),
        `${(p99 / idleP99).toFixed(2)}×`, mib(o.rssBefore), mib(o.peak), answered]);
    }
    const again = await probeUntil(server.base, () => true, SAMPLES);
    rows.push([`idle again (${again.length} probes, drift check)`, ms(percentile(again, 50)), ms(percentile(again, 99)), ms(Math.max(...again)), `${(percentile(again, 99) / idleP99).toFixed(2)}×`, mib(memory(pid).rss), '', '']);

    process.stdout.write(`\nGET /v2/health/ready latency, one probe every ${INTERVAL_MS} ms, while one hostile client sends back to back for ${SECONDS} s (goal: p99 <= 2x idle p99); server ${SERVER_ROOT}\n\n`);
    process.stdout.write('| load | p50 ms | p99 ms | max ms | p99 / idle p99 | RSS before MiB | peak RSS MiB | hostile client |\n|---|---|---|---|---|---|---|---|\n');
    for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
  } finally {
    agent.destroy();
    server.child.kill('SIGTERM');
    bare?.child.kill('SIGTERM');
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
