// What `--dp 2` buys over one rank, in one run with one client and one model (every rank `--threads 1`):
// throughput of offline-style HTTP load (`trtllm-launch bench token-norm-dist`, a fixed concurrency) on one rank
// against two replicas, whose goal (>= 1.8x) assumes each replica has cores of its own, with two independent
// one-rank servers as the same-run ceiling; and what KV-aware routing buys on a seeded multi-turn trace (`bench
// multi-turn`, below): `--router kv` against `--router round-robin` (the issue's baseline) and `least-load` with
// `--enable-kv-cache-reuse`, one rank with reuse for context — later-turn TTFT and each replica's reused KV blocks
// read from the metrics port before and after.
//   node dist/bench/data-parallel.js [--model <dir>] [--requests 192] [--concurrency 64] [--conversations 16] [--turns 4]
//     [--system-prompt 512] [--per-system-prompt 1] [--user-len 96] [--answer-len 16] [--turn-concurrency 4] [--kv-tokens 12288]
//     [--only throughput|routing] [--server-args "<launcher flags every server of the routing runs gets>"]
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
const REQUESTS = Number(arg('--requests', '192'));
// Enough requests in flight that each replica, not the client, sets the pace (one rank runs them all at once).
const CONCURRENCY = Number(arg('--concurrency', '64'));
// The routing trace: conversations with a long context of their own (a 512-token document as the system prompt,
// one per conversation) and a KV pool per rank smaller than all conversations' context together but not than half
// of it — where routing decides whether two replicas hold every conversation once or each holds half of them twice.
const CONVERSATIONS = Number(arg('--conversations', '16'));
const TURNS = Number(arg('--turns', '4'));
const SYSTEM_PROMPT = Number(arg('--system-prompt', '512'));
const PER_SYSTEM_PROMPT = Number(arg('--per-system-prompt', '1'));  // conversations sharing one system prompt
const USER_LEN = Number(arg('--user-len', '96'));                   // tokens of each user message
const ANSWER_LEN = Number(arg('--answer-len', '16'));
const TURN_CONCURRENCY = Number(arg('--turn-concurrency', '4'));
const KV_TOKENS = Number(arg('--kv-tokens', '12288'));               // --max-tokens-in-paged-kv-cache of every rank
const ONLY = arg('--only', '');
if (ONLY !== '' && ONLY !== 'throughput' && ONLY !== 'routing') throw new Error(`--only must be throughput or routing, got "${ONLY}"`);
// E.g. "--enable-chunked-context --max-num-tokens 256": the same for every routing run (one rank and each router).
const SERVER_ARGS = arg('--server-args', '').split(/\s+/).filter((a) => a !== '');
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

/** The throughput runs' token-norm-dist traffic: 128 -> 64 tokens. */
const load = (requests: number, concurrency: number, warmup: number) => ['--num-requests', String(requests), '--input-mean', '128',
  '--output-mean', '64', '--concurrency', String(concurrency), '--warmup-requests', String(warmup)];

async function throughput(label: string, args: string[]) {
  process.stderr.write(`${label}: starting\n`);
  const server = await start(args);
  try {
    process.stderr.write(`${label}: token-norm-dist, ${REQUESTS} requests of 128 -> 64 tokens, concurrency ${CONCURRENCY}\n`);
    return await bench(server, 'token-norm-dist', load(REQUESTS, CONCURRENCY, 4));
  } finally {
    await stop(server);
  }
}

/** Two one-rank servers side by side, each given half the load at once: what two replicas could do with no
 * router in front (the machine's shared caches and memory bandwidth included) — dp 2's same-run ceiling. */
async function throughputPair(label: string) {
  process.stderr.write(`${label}: starting two servers\n`);
  const servers = await Promise.all([start([]), start([])]);
  try {
    process.stderr.write(`${label}: token-norm-dist, ${REQUESTS / 2} requests each, concurrency ${CONCURRENCY / 2} each\n`);
    const t0 = Date.now();
    const runs = await Promise.all(servers.map((server) => bench(server, 'token-norm-dist', load(REQUESTS / 2, CONCURRENCY / 2, 2))));
    // Both runs' tokens over the longer run's measured time (a sum of the two rates would overstate it when one
    // finishes first).
    const longest = Math.max(...runs.map((r) => r.total_latency_ms as number)) / 1000;
    const tokens = runs.reduce((a, r) => a + (r.output_tokens as number), 0);
    return { output_tokens_per_sec: tokens / longest, seconds: (Date.now() - t0) / 1000, runs };
  } finally {
    await Promise.all(servers.map(stop));
  }
}

async function routing(label: string, args: string[], replicas: number) {
  process.stderr.write(`${label}: starting\n`);
  const server = await start(args);
  try {
    const before = await counters(server, replicas);
    process.stderr.write(`${label}: multi-turn, ${CONVERSATIONS} conversations x ${TURNS} turns\n`);
    const summary = await bench(server, 'multi-turn', ['--num-conversations', String(CONVERSATIONS), '--num-turns', String(TURNS),
      '--system-prompt-len', String(SYSTEM_PROMPT), '--conversations-per-system-prompt', String(PER_SYSTEM_PROMPT),
      '--input-mean', String(USER_LEN), '--output-mean', String(ANSWER_LEN), '--concurrency', String(TURN_CONCURRENCY), '--seed', '0']);
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
const reuse = ['--enable-kv-cache-reuse', '--max-tokens-in-paged-kv-cache', String(KV_TOKENS), ...SERVER_ARGS];
const measureThroughput = ONLY !== 'routing', measureRouting = ONLY !== 'throughput';
const dp1 = measureThroughput ? await throughput('dp 1 (one rank)', []) : undefined;
const dp2 = measureThroughput ? await throughput('dp 2', dp) : undefined;
const pair = measureThroughput ? await throughputPair('two one-rank servers') : undefined;
const single = measureRouting ? await routing('one rank, reuse', reuse, 1) : undefined;
const roundRobin = measureRouting ? await routing('dp 2, reuse, --router round-robin', [...dp, ...reuse, '--router', 'round-robin'], 2) : undefined;
const leastLoad = measureRouting ? await routing('dp 2, reuse, --router least-load', [...dp, ...reuse, '--router', 'least-load'], 2) : undefined;
const kv = measureRouting ? await routing('dp 2, reuse, --router kv', [...dp, ...reuse, '--router', 'kv'], 2) : undefined;

const f = (x: number, d = 1) => x.toFixed(d);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const failed = (s: Record<string, any>) => (s.failed_requests > 0 ? ` (${s.failed_requests} failed)` : '');
const later = (s: Record<string, any>) => `${f(s.later_turns_p50_ttft_ms)} | ${f(s.later_turns_p90_ttft_ms)}`;
const header = [
  `model ${MODEL}; ${cpus()[0]?.model ?? 'CPU'}, ${cores} cores (os.availableParallelism); every rank --threads 1;`
    + ' server and client on this machine',
  `dp 2 runs 3 processes (orchestrator + 2 replicas) and the bench client on ${cores} cores: the >= 1.8x goal assumes each replica has cores of its own${cores < 4 ? ' (not so here)' : ''}`,
  '',
];
const throughputLines = (dp1: Record<string, any>, dp2: Record<string, any>, pair: Record<string, any>) => [
  `throughput: token-norm-dist, ${REQUESTS} requests, 128 -> 64 tokens, concurrency ${CONCURRENCY}, over HTTP`,
  '| server | output tok/s | requests/s | TTFT p50 (ms) | e2e p50 (ms) |',
  '|---|---|---|---|---|',
  ...[['one rank', dp1], ['--dp 2 (least-load)', dp2]].map(([name, s]: any) =>
    `| ${name} | ${f(s.output_tokens_per_sec)}${failed(s)} | ${f(s.requests_per_sec, 2)} | ${f(s.median_ttft_ms)} | ${f(s.median_e2e_latency_ms)} |`),
  `| two one-rank servers side by side, half the load each (no router) | ${f(pair.output_tokens_per_sec)} (both runs' tokens / the longer run's time) | | | |`,
  `dp2 / dp1 output tok/s: ${(dp2.output_tokens_per_sec / dp1.output_tokens_per_sec).toFixed(2)}x (goal >= 1.8x with a core per replica);`
    + ` two servers / dp1: ${(pair.output_tokens_per_sec / dp1.output_tokens_per_sec).toFixed(2)}x; dp2 / two servers: ${(dp2.output_tokens_per_sec / pair.output_tokens_per_sec).toFixed(2)}x`,
  '',
];
const routingLines = (single: any, roundRobin: any, leastLoad: any, kv: any) => [
  `routing: multi-turn, ${CONVERSATIONS} conversations x ${TURNS} turns, ${SYSTEM_PROMPT}-token system prompt per ${PER_SYSTEM_PROMPT} conversations,`
    + ` ${USER_LEN}-token user messages, ${ANSWER_LEN}-token answers, concurrency ${TURN_CONCURRENCY}, seed 0, --enable-kv-cache-reuse,`
    + ` a KV pool of ${KV_TOKENS} tokens a rank${SERVER_ARGS.length > 0 ? `, ${SERVER_ARGS.join(' ')}` : ''};`
    + ` ${(100 * single.summary.reusable_input_fraction).toFixed(1)}% of prompt tokens reusable by a perfect prefix cache`,
  '| server | first-turn TTFT p50 (ms) | later-turn TTFT p50 (ms) | later-turn TTFT p90 (ms) | reused KV blocks (per replica) | requests routed (per replica, incl. warm-up) | output tok/s |',
  '|---|---|---|---|---|---|---|',
  ...[['one rank', single], ['--dp 2 --router round-robin', roundRobin], ['--dp 2 --router least-load', leastLoad], ['--dp 2 --router kv', kv]].map(([name, r]: any) =>
    `| ${name} | ${f(r.summary.first_turn_p50_ttft_ms)} | ${later(r.summary)}${failed(r.summary)} | ${r.reused.join(' / ')} (sum ${sum(r.reused)}) | ${r.routed.length === 0 ? '' : r.routed.join(' / ')} | ${f(r.summary.output_tokens_per_sec)} |`),
  `later-turn TTFT p50, round-robin / kv: ${(roundRobin.summary.later_turns_p50_ttft_ms / kv.summary.later_turns_p50_ttft_ms).toFixed(2)}x (goal >= 2x);`
    + ` least-load / kv: ${(leastLoad.summary.later_turns_p50_ttft_ms / kv.summary.later_turns_p50_ttft_ms).toFixed(2)}x`,
  '',
];
const summaryLines = (dp1: any, dp2: any, single: any, roundRobin: any, leastLoad: any, kv: any) => [
  'summary',
  '| measure | one rank | --dp 2 round-robin | --dp 2 least-load | --dp 2 kv | ratio |',
  '|---|---|---|---|---|---|',
  `| output tok/s, token-norm-dist | ${f(dp1.output_tokens_per_sec)} | | ${f(dp2.output_tokens_per_sec)} | | dp2 / dp1 ${(dp2.output_tokens_per_sec / dp1.output_tokens_per_sec).toFixed(2)}x |`,
  ...(['p50', 'p90'] as const).map((q) => {
    const v = (r: any) => r.summary[`later_turns_${q}_ttft_ms`] as number;
    return `| later-turn TTFT ${q} (ms), multi-turn | ${f(v(single))} | ${f(v(roundRobin))} | ${f(v(leastLoad))} | ${f(v(kv))} | round-robin / kv ${(v(roundRobin) / v(kv)).toFixed(2)}x |`;
  }),
  `| reused KV blocks, multi-turn | ${sum(single.reused)} | ${sum(roundRobin.reused)} | ${sum(leastLoad.reused)} | ${sum(kv.reused)} | |`,
];
const lines = [
  ...header,
  ...(dp1 && dp2 && pair ? throughputLines(dp1, dp2, pair) : []),
  ...(single && roundRobin && leastLoad && kv ? routingLines(single, roundRobin, leastLoad, kv) : []),
  ...(dp1 && dp2 && single && roundRobin && leastLoad && kv ? summaryLines(dp1, dp2, single, roundRobin, leastLoad, kv) : []),
];
process.stdout.write(`${lines.join('\n')}\n`);
