// What `--dp 2` buys over one rank, in one run with one client and one model (every rank `--threads 1`):
// throughput of offline-style HTTP load (`trtllm-launch bench token-norm-dist`, a fixed concurrency) on one rank
// against two replicas, whose goal (>= 1.8x) assumes each replica has cores of its own; and what KV-aware routing
// buys on a seeded multi-turn trace (`bench multi-turn`, system prompts shared by pairs of conversations):
// `--router kv` against `--router least-load` with `--enable-kv-cache-reuse`, one rank with reuse for context —
// later-turn TTFT and each replica's reused KV blocks read from the metrics port before and after.
//   node dist/bench/data-parallel.js [--model <dir>] [--requests 96] [--conversations 8] [--turns 4] [--system-prompt 256]
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { packageRoot } from '../worker/common/package-root.js';
import { freePort } from '../test/helpers/free-port.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
};
const MODEL = arg('--model', join(packageRoot(), 'examples', 'models', 'brown-llama-17m'));
const REQUESTS = Number(arg('--requests', '96'));
const CONVERSATIONS = Number(arg('--conversations', '8'));
const TURNS = Number(arg('--turns', '4'));
const SYSTEM_PROMPT = Number(arg('--system-prompt', '256'));
const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');
const READY_TIMEOUT_MS = 120_000;

interface Server { child: ResultPromise; url: string; metrics: string; output: () => string }

/** A server as a user starts it, on free ports; resolves once the launcher says it is ready and /v2/health/ready answers. */
async function start(args: string[]): Promise<Server> {
  const [http, metrics, grpc] = [await freePort(), await freePort(), await freePort()];
  const child = execa('node', [BIN, '--model', MODEL, '--threads', '1', '--log-level', 'warn', '--http-port', String(http),
    '--metrics-port', String(metrics), '--grpc-port', String(grpc), ...args], { reject: false, all: true, forceKillAfterDelay: 20_000 });
  let all = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready after ${READY_TIMEOUT_MS / 1000} s:\n${all.slice(-3000)}`)), READY_TIMEOUT_MS);
    child.all!.on('data', (c: Buffer) => {
      all += c.toString();
      if (/metrics: curl|\[launcher\] ready after/.test(all)) { clearTimeout(timer); resolve(); }
    });
    void child.then(() => { clearTimeout(timer); reject(new Error(`server exited before ready:\n${all.slice(-3000)}`)); });
  }).catch((error: unknown) => { child.kill('SIGKILL'); throw error; });
  const server = { child, url: `127.0.0.1:${http}`, metrics: `http://127.0.0.1:${metrics}/metrics`, output: () => all };
  for (let i = 0; ; i += 1) {
    if ((await fetch(`http://${server.url}/v2/health/ready`).catch(() => undefined))?.status === 200) return server;
    if (i === 100) { await stop(server); throw new Error(`/v2/health/ready not 200 10 s after the ready line:\n${all.slice(-3000)}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** SIGTERM drains and stops every rank; execa's forceKillAfterDelay covers a server that does not. */
async function stop(server: Server): Promise<void> {
  server.child.kill('SIGTERM');
  await server.child;
}

/** `trtllm-launch bench <source> --json` against a server: its JSON summary (progress and notes are on stderr). */
async function bench(server: Server, source: string, flags: string[]): Promise<Record<string, any>> {
  const r = await execa('node', [BIN, 'bench', source, '-u', server.url, '--json', '--no-progress', ...flags], { reject: false });
  if (r.exitCode !== 0) throw new Error(`bench ${source} exited ${r.exitCode}:\n${r.stderr.slice(-3000)}\nserver:\n${server.output().slice(-3000)}`);
  return JSON.parse(r.stdout) as Record<string, any>;
}

/** Per replica, the value of a `replica`-labelled family (cumulative families here). */
function perReplica(lines: string[], family: string, replicas: number): number[] {
  return Array.from({ length: replicas }, (_, r) => valueOf(lines.find((l) => l.startsWith(`${family}{`) && l.includes(`replica="${r}"`))));
}

const valueOf = (line: string | undefined) => (line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1)));

/** Reused KV blocks (cumulative) and requests routed, per replica (`trtllm_replica_*`); one rank has no replica
 * label: its reused blocks are `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="reused"}`. */
async function counters(server: Server, replicas: number): Promise<{ reused: number[]; routed: number[] }> {
  const lines = (await (await fetch(server.metrics)).text()).split('\n');
  if (replicas === 1) {
    const reused = valueOf(lines.find((l) => l.startsWith('nv_trt_llm_kv_cache_block_metrics{') && l.includes('kv_cache_block_type="reused"')));
    return { reused: [reused], routed: [] };
  }
  return { reused: perReplica(lines, 'trtllm_replica_kv_cache_reused_blocks', replicas), routed: perReplica(lines, 'trtllm_replica_requests_routed_total', replicas) };
}

// Ranks report their KV cache stats twice a second: a reading taken this long after the last request has them all.
const STATS_SETTLE_MS = 1500;

async function throughput(label: string, args: string[]) {
  process.stderr.write(`${label}: starting\n`);
  const server = await start(args);
  try {
    process.stderr.write(`${label}: token-norm-dist, ${REQUESTS} requests of 128 -> 64 tokens, concurrency 16\n`);
    return await bench(server, 'token-norm-dist', ['--num-requests', String(REQUESTS), '--input-mean', '128', '--output-mean', '64',
      '--concurrency', '16', '--warmup-requests', '4']);
  } finally {
    await stop(server);
  }
}

async function routing(label: string, args: string[], replicas: number) {
  process.stderr.write(`${label}: starting\n`);
  const server = await start(args);
  try {
    const before = await counters(server, replicas);
    process.stderr.write(`${label}: multi-turn, ${CONVERSATIONS} conversations x ${TURNS} turns\n`);
    const summary = await bench(server, 'multi-turn', ['--num-conversations', String(CONVERSATIONS), '--num-turns', String(TURNS),
      '--system-prompt-len', String(SYSTEM_PROMPT), '--conversations-per-system-prompt', '2', '--input-mean', '64', '--output-mean', '32',
      '--concurrency', '4', '--seed', '0']);
    await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
    const after = await counters(server, replicas);
    const minus = (a: number[], b: number[]) => a.map((x, i) => x - b[i]!);
    return { summary, reused: minus(after.reused, before.reused), routed: minus(after.routed, before.routed) };
  } finally {
    await stop(server);
  }
}

const cores = availableParallelism();
const dp = ['--dp', '2', '--tp', '1', '--oversubscribe'];
const reuse = ['--enable-kv-cache-reuse'];
const dp1 = await throughput('dp 1 (one rank)', []);
const dp2 = await throughput('dp 2', dp);
const single = await routing('one rank, reuse', reuse, 1);
const leastLoad = await routing('dp 2, reuse, --router least-load', [...dp, ...reuse, '--router', 'least-load'], 2);
const kv = await routing('dp 2, reuse, --router kv', [...dp, ...reuse, '--router', 'kv'], 2);

const f = (x: number, d = 1) => x.toFixed(d);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const failed = (s: Record<string, any>) => (s.failed_requests > 0 ? ` (${s.failed_requests} failed)` : '');
const later = (s: Record<string, any>) => `${f(s.later_turns_p50_ttft_ms)} | ${f(s.later_turns_p90_ttft_ms)}`;
const lines = [
  `model ${MODEL}; ${cpus()[0]?.model ?? 'CPU'}, ${cores} cores (os.availableParallelism); every rank --threads 1;`
    + ' server and client on this machine',
  `dp 2 runs 3 processes (orchestrator + 2 replicas) and the bench client on ${cores} cores: the >= 1.8x goal assumes each replica has cores of its own${cores < 4 ? ' (not so here)' : ''}`,
  '',
  `throughput: token-norm-dist, ${REQUESTS} requests, 128 -> 64 tokens, concurrency 16, over HTTP`,
  '| server | output tok/s | requests/s | TTFT p50 (ms) | e2e p50 (ms) |',
  '|---|---|---|---|---|',
  ...[['one rank', dp1], ['--dp 2 (least-load)', dp2]].map(([name, s]: any) =>
    `| ${name} | ${f(s.output_tokens_per_sec)}${failed(s)} | ${f(s.requests_per_sec, 2)} | ${f(s.median_ttft_ms)} | ${f(s.median_e2e_latency_ms)} |`),
  `dp2 / dp1 output tok/s: ${(dp2.output_tokens_per_sec / dp1.output_tokens_per_sec).toFixed(2)}x (goal >= 1.8x with a core per replica)`,
  '',
  `routing: multi-turn, ${CONVERSATIONS} conversations x ${TURNS} turns, ${SYSTEM_PROMPT}-token system prompt per pair of conversations,`
    + ` 64-token user messages, 32-token answers, concurrency 4, seed 0, --enable-kv-cache-reuse;`
    + ` ${(100 * single.summary.reusable_input_fraction).toFixed(1)}% of prompt tokens reusable by a perfect prefix cache`,
  '| server | first-turn TTFT p50 (ms) | later-turn TTFT p50 (ms) | later-turn TTFT p90 (ms) | reused KV blocks (per replica) | requests routed (per replica, incl. warm-up) | output tok/s |',
  '|---|---|---|---|---|---|---|',
  ...[['one rank', single], ['--dp 2 --router least-load', leastLoad], ['--dp 2 --router kv', kv]].map(([name, r]: any) =>
    `| ${name} | ${f(r.summary.first_turn_p50_ttft_ms)} | ${later(r.summary)}${failed(r.summary)} | ${r.reused.join(' / ')} (sum ${sum(r.reused)}) | ${r.routed.length === 0 ? '' : r.routed.join(' / ')} | ${f(r.summary.output_tokens_per_sec)} |`),
  `later-turn TTFT p50, least-load / kv: ${(leastLoad.summary.later_turns_p50_ttft_ms / kv.summary.later_turns_p50_ttft_ms).toFixed(2)}x`,
  '',
  'summary',
  '| measure | one rank | --dp 2 least-load | --dp 2 kv | ratio |',
  '|---|---|---|---|---|',
  `| output tok/s, token-norm-dist | ${f(dp1.output_tokens_per_sec)} | ${f(dp2.output_tokens_per_sec)} | | dp2 / dp1 ${(dp2.output_tokens_per_sec / dp1.output_tokens_per_sec).toFixed(2)}x |`,
  `| later-turn TTFT p50 (ms), multi-turn | ${f(single.summary.later_turns_p50_ttft_ms)} | ${f(leastLoad.summary.later_turns_p50_ttft_ms)} | ${f(kv.summary.later_turns_p50_ttft_ms)} | least-load / kv ${(leastLoad.summary.later_turns_p50_ttft_ms / kv.summary.later_turns_p50_ttft_ms).toFixed(2)}x |`,
  `| later-turn TTFT p90 (ms), multi-turn | ${f(single.summary.later_turns_p90_ttft_ms)} | ${f(leastLoad.summary.later_turns_p90_ttft_ms)} | ${f(kv.summary.later_turns_p90_ttft_ms)} | least-load / kv ${(leastLoad.summary.later_turns_p90_ttft_ms / kv.summary.later_turns_p90_ttft_ms).toFixed(2)}x |`,
  `| reused KV blocks, multi-turn | ${sum(single.reused)} | ${sum(leastLoad.reused)} | ${sum(kv.reused)} | |`,
];
process.stdout.write(`${lines.join('\n')}\n`);
