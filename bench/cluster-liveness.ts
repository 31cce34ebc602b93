// Idle followers and hung ranks (issue 22), each against a baseline measured in the same run (the machine's load is
// printed with the results: on a shared machine every figure moves):
//  1. CPU per rank of an idle `--world-size 4 --tp 4 --oversubscribe` cluster on the tiny Llama over --idle seconds,
//     for each way a follower can wait for its next plan (TRTLLM_IDLE_WAIT): `sleep` (the default: spin 1 ms, then
//     sleep on the wake link), `timed` (sleeps growing to 1 ms, what a follower on another host does), and the
//     baselines `spin` (never sleep: what Open MPI's blocking receive did before) and `spin` under Open MPI's
//     mpi_yield_when_idle. CPU is each process's own utime + stime (/proc/<pid>/stat), which a loaded machine does not
//     inflate (it may deflate a spinner's: a spinner gets only its share of a busy core).
//  2. The first request after --gap seconds of idle against one sent the moment the previous one ended (the busy
//     cluster's: followers still in their spin), --runs idle samples per mode, `mpirun -np 4` of
//     bench/programs/idle-rank.js (tp 4): the engine's TTFT (firstToken - arrival, no HTTP in it) and the leader's
//     communication time in the request's first iteration, which holds its wait for late followers. A world of one
//     rank (no followers) in the same run is the baseline of what idle costs anyway (caches, the leader's own wake).
//  3. SIGSTOP of a follower → gang down (launcher exited, no process left) with --hang-timeout 3, against SIGKILL of
//     a follower (the crash path); seconds from the signal, with a request sent right after it.
//   node dist/bench/cluster-liveness.js [--idle 60] [--gap 10] [--runs 6] [--modes sleep,timed,spin,spin+yield] [--hangs 3]
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { median } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';
import { freePort, processesWith } from '../test/helpers/processes.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const IDLE_S = Number(arg('--idle', '60'));
const GAP_S = Number(arg('--gap', '10'));
const RUNS = Number(arg('--runs', '6'));
const HANGS = Number(arg('--hangs', '3'));
const MODES = arg('--modes', 'sleep,timed,spin,spin+yield').split(',');
const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama');
const TICKS_PER_S = 100;  // USER_HZ, what /proc/<pid>/stat counts in

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Cluster { child: ResultPromise; port: number; output: () => string; marker: string }

async function startCluster(worldSize: number, mode: string, extra: string[] = []): Promise<Cluster> {
  const port = await freePort();
  let all = '';
  const env: Record<string, string> = { TRTLLM_IDLE_WAIT: mode.replace('+yield', '') };
  if (mode.endsWith('+yield')) env.OMPI_MCA_mpi_yield_when_idle = '1';
  const child = execa('node', [BIN, '--model', MODEL, '--world-size', String(worldSize), '--oversubscribe', '--threads', '1',
    '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), ...extra],
  { reject: false, all: true, env });
  await new Promise<void>((resolve, reject) => {
    child.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (all.includes('[launcher] ready after')) resolve();
    });
    void child.then(() => reject(new Error(`the cluster exited before ready:\n${all.slice(-2000)}`)));
  });
  return { child, port, output: () => all, marker: `--http-port ${port}` };
}

async function stopCluster(c: Cluster): Promise<void> {
  c.child.kill('SIGINT');
  await c.child;
}

/** World rank -> pid of every rank of the cluster (from each process's OMPI_COMM_WORLD_RANK). */
function rankPids(c: Cluster): Map<number, number> {
  const out = new Map<number, number>();
  for (const { pid } of processesWith(c.marker)) {
    try {
      const rank = /(?:^|\0)OMPI_COMM_WORLD_RANK=(\d+)\0/.exec(readFileSync(`/proc/${pid}/environ`, 'utf8'))?.[1];
      if (rank !== undefined) out.set(Number(rank), pid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
}

/** Percent of one core each rank used while the cluster sat idle for `seconds`. */
async function idleCpu(c: Cluster, seconds: number): Promise<number[]> {
  const pids = rankPids(c);
  const ranks = [...pids.keys()].sort((a, b) => a - b);
  await sleep(2000);  // past the warm-up's last plan: every follower is in its idle wait
  const before = ranks.map((r) => cpuSeconds(pids.get(r)!));
  await sleep(seconds * 1000);
  return ranks.map((r, i) => (100 * (cpuSeconds(pids.get(r)!) - before[i]!)) / seconds);
}

interface Sample { ttftMs: number; commMs: number }

/** The first-request samples of one follower mode (np 1: no followers, the baseline). */
async function firstRequests(mode: string, np: number): Promise<{ idle: Sample[]; busy: Sample[] }> {
  const program = join(packageRoot(), 'dist', 'bench', 'programs', 'idle-rank.js');
  const env: Record<string, string> = { TRTLLM_IDLE_WAIT: mode.replace('+yield', ''), OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' };
  if (mode.endsWith('+yield')) env.OMPI_MCA_mpi_yield_when_idle = '1';
  const args = [program, MODEL, String(np), String(GAP_S), String(RUNS)];
  const child = np === 1
    ? await execa('node', args, { all: true, reject: false, env })
    : await execa('mpirun', ['-np', String(np), '--oversubscribe', '--bind-to', 'none', '-x', 'TRTLLM_IDLE_WAIT', 'node', ...args], { all: true, reject: false, env });
  const line = child.all.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`idle-rank (${mode}, np ${np}) failed (exit ${child.exitCode}):\n${child.all.slice(-2000)}`);
  return JSON.parse(line.slice(7)) as { idle: Sample[]; busy: Sample[] };
}

/** Seconds from the signal to the launcher's exit and to no process left, with a request sent right after it. */
async function gangDown(signal: 'SIGSTOP' | 'SIGKILL'): Promise<{ exited: number; gone: number; rootCause: string }> {
  const c = await startCluster(2, 'sleep', ['--hang-timeout', '3']);
  const follower = rankPids(c).get(1)!;
  const started = performance.now();
  process.kill(follower, signal);
  // A request, so the leader's next forward pass needs the stopped follower (the crash path does not care).
  void fetch(`http://127.0.0.1:${c.port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], request_output_len: 2 }) })
    .catch(() => undefined);
  await c.child;
  const exited = (performance.now() - started) / 1000;
  while (processesWith(c.marker).length > 0) await sleep(5);
  const gone = (performance.now() - started) / 1000;
  const rootCause = /Root cause:\n {2}(.*)/.exec(c.output())?.[1] ?? '(none)';
  return { exited, gone, rootCause };
}

const f = (x: number, d = 2) => x.toFixed(d);

async function main(): Promise<void> {
  const lines: string[] = [
    `${cpus()[0]?.model}, ${cpus().length} cores; node ${process.version}; ${(await execa('mpirun', ['--version'])).stdout.split('\n')[0]}; ` +
      `load average at start ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
    '',
    `Idle CPU per rank (% of one core) over ${IDLE_S} s of an idle \`--world-size 4 --tp 4\` cluster:`,
    '',
    '| follower idle wait | rank 0 | rank 1 | rank 2 | rank 3 |',
    '|---|---|---|---|---|',
  ];
  for (const mode of MODES) {
    process.stderr.write(`mode ${mode}: idle CPU over ${IDLE_S} s ...\n`);
    const c = await startCluster(4, mode, ['--tp', '4']);
    try {
      const cpu = await idleCpu(c, IDLE_S);
      lines.push(`| ${mode} | ${cpu.map((x) => f(x)).join(' | ')} |`);
      process.stderr.write(`${lines.at(-1)}\n`);
    } finally {
      await stopCluster(c);
    }
  }
  lines.push('', `The first request after ${GAP_S} s idle vs a busy one (right after the previous request), ms, medians of ${RUNS} idle and ` +
    `${2 * RUNS} busy samples; TTFT = the engine's firstToken - arrival; wait = the leader's communication time in the request's first iteration:`, '',
    '| ranks, follower idle wait | TTFT busy | TTFT after idle | TTFT added by idle | wait busy | wait after idle | wait added by idle |',
    '|---|---|---|---|---|---|---|');
  for (const [mode, np] of [['-', 1], ...MODES.map((m) => [m, 4])] as [string, number][]) {
    process.stderr.write(`first requests: np ${np}, ${mode} ...\n`);
    const { idle, busy } = await firstRequests(mode === '-' ? 'sleep' : mode, np);
    const m = (xs: Sample[], k: keyof Sample) => median(xs.map((x) => x[k]));
    lines.push(`| ${np === 1 ? '1 rank (no followers: the baseline)' : `4 ranks, ${mode}`} | ${f(m(busy, 'ttftMs'))} | ${f(m(idle, 'ttftMs'))} | ` +
      `${f(m(idle, 'ttftMs') - m(busy, 'ttftMs'))} | ${f(m(busy, 'commMs'), 3)} | ${f(m(idle, 'commMs'), 3)} | ${f(m(idle, 'commMs') - m(busy, 'commMs'), 3)} |`);
    process.stderr.write(`${lines.at(-1)}\n`);
  }
  lines.push('', `Gang down (s from the signal to a follower, --world-size 2, --hang-timeout 3), ${HANGS} runs each:`, '',
    '| signal | launcher exited (median) | no process left (median) | max | root cause printed |', '|---|---|---|---|---|');
  for (const signal of ['SIGKILL', 'SIGSTOP'] as const) {
    const runs = [];
    for (let i = 0; i < HANGS; i += 1) runs.push(await gangDown(signal));
    process.stderr.write(`${signal}: ${runs.map((r) => f(r.gone)).join(', ')} s\n`);
    lines.push(`| ${signal} (${signal === 'SIGKILL' ? 'crash, the baseline' : 'hang'}) | ${f(median(runs.map((r) => r.exited)))} | ` +
      `${f(median(runs.map((r) => r.gone)))} | ${f(Math.max(...runs.map((r) => r.gone)))} | ${runs[0]!.rootCause} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
