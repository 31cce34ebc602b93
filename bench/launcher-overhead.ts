// What the launcher costs on top of mpirun: launch → ready of `trtllm-launch --world-size 2 --oversubscribe` on the
// tiny Llama minus the model load (the leader's "loaded ... in X s"), against a bare `mpirun -np 2 --oversubscribe
// node -e ''` measured in the same run; crash → all ranks gone (SIGKILL a follower; until the launcher has exited
// and no rank, mpirun or orted of that cluster remains); launcher kill -9 → all gone (until no mpirun or rank of
// that cluster remains, and until its three ports can be bound again); and mpirun SIGKILL → the launcher exited (by
// then every rank is gone and Open MPI's files removed: it waits for that). Best and median of --runs (default 5).
//   node dist/bench/launcher-overhead.js [--runs 5] [--only teardown]   (teardown: the last three measures only)
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { median } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';
import { freePort } from '../test/helpers/free-port.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg >= 0 ? Number(process.argv[runsArg + 1]) : 5;
const onlyArg = process.argv.indexOf('--only');
const ONLY_TEARDOWN = onlyArg >= 0 && process.argv[onlyArg + 1] === 'teardown';
const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama');
const ROOT = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];

const seconds = (since: number) => (performance.now() - since) / 1000;
const best = (xs: number[]) => Math.min(...xs);


/** Live (non-zombie) processes whose command line contains marker. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker)) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function rawMpirun(): Promise<number> {
  const started = performance.now();
  await execa('mpirun', ['-np', '2', '--oversubscribe', ...ROOT, process.execPath, '-e', '']);
  return seconds(started);
}

/** Whether `port` can be bound on all interfaces (as the launcher's pre-check binds it). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}

interface Cluster { child: ResultPromise; port: number; metrics: number; output: () => string; ready: Promise<number> }

function startCluster(port: number, metrics: number): Cluster {
  let all = '';
  const started = performance.now();
  // No gRPC port: the benchmark of issue 6 ran without one, and the figures stay comparable.
  const child = execa('node', [BIN, '--model', MODEL, '--world-size', '2', '--oversubscribe', '--http-port', String(port),
    '--metrics-port', String(metrics), '--threads', '1'], { reject: false, all: true });
  const ready = new Promise<number>((resolve, reject) => {
    child.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (all.includes('[launcher] ready after')) resolve(seconds(started));
    });
    void child.then(() => reject(new Error(`the cluster exited before ready:\n${all.slice(-2000)}`)));
  });
  return { child, port, metrics, output: () => all, ready };
}

async function launchToReady(): Promise<{ ready: number; load: number }> {
  const cluster = startCluster(await freePort(), await freePort());
  const ready = await cluster.ready;
  const load = Number(/\[rank 0\] .*loaded .* in ([\d.]+) s/.exec(cluster.output())?.[1] ?? NaN);
  cluster.child.kill('SIGINT');
  await cluster.child;
  return { ready, load };
}

async function crashToGone(): Promise<number> {
  const cluster = startCluster(await freePort(), await freePort());
  await cluster.ready;
  const marker = `--http-port ${cluster.port}`;
  const leader = Number(/leader pid (\d+)/.exec(cluster.output())?.[1]);
  const follower = processesWith(marker).find((pid) => {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return pid !== leader && cmd[0] === process.execPath && cmd.includes('rank');
  });
  if (follower === undefined) throw new Error('no follower rank found');
  const started = performance.now();
  process.kill(follower, 'SIGKILL');
  await cluster.child;
  while (processesWith(marker).length > 0) await new Promise((r) => setTimeout(r, 5));
  return seconds(started);
}

/** kill -9 of the launcher until no mpirun or rank of its cluster remains; and until its ports can be bound again. */
async function launcherKillToGone(): Promise<{ gone: number; portsFree: number }> {
  const cluster = startCluster(await freePort(), await freePort());
  await cluster.ready;
  const marker = `--http-port ${cluster.port}`;
  const started = performance.now();
  cluster.child.kill('SIGKILL');
  let gone: number | undefined;
  let free: number | undefined;
  while (gone === undefined || free === undefined) {
    if (gone === undefined && processesWith(marker).length === 0) gone = seconds(started);
    if (free === undefined && await portFree(cluster.port) && await portFree(cluster.metrics)) free = seconds(started);
    await new Promise((r) => setTimeout(r, 5));
  }
  await cluster.child;
  return { gone, portsFree: free };
}

/** SIGKILL of mpirun until the launcher has exited: it waits until every rank is gone and the files are removed. */
async function mpirunKillToExit(): Promise<number> {
  const cluster = startCluster(await freePort(), await freePort());
  await cluster.ready;
  const mpirun = processesWith(`--http-port ${cluster.port}`).find((pid) => /(^|\/)mpirun$/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!));
  if (mpirun === undefined) throw new Error('no mpirun found');
  const started = performance.now();
  process.kill(mpirun, 'SIGKILL');
  await cluster.child;
  return seconds(started);
}

const row = (name: string, xs: number[], goal = '') => `| ${name} | ${best(xs).toFixed(3)} | ${median(xs).toFixed(3)} | ${goal} |`;

/** The three ends no one asked for, one run: issue 22's launcher kill -9 and mpirun's death. */
async function teardownRun(into: { killed: number[]; free: number[]; mpirun: number[] }): Promise<string> {
  const k = await launcherKillToGone();
  into.killed.push(k.gone);
  into.free.push(k.portsFree);
  into.mpirun.push(await mpirunKillToExit());
  return `launcher kill -9 → gone ${k.gone.toFixed(3)} s (ports free ${k.portsFree.toFixed(3)} s), mpirun SIGKILL → launcher exited ${into.mpirun.at(-1)!.toFixed(3)} s`;
}

function teardownRows(t: { killed: number[]; free: number[]; mpirun: number[] }): string[] {
  return [
    row('**launcher kill -9 → all gone** (no mpirun, no rank)', t.killed, '≤ 2'),
    row('launcher kill -9 → HTTP and metrics ports free', t.free),
    row('mpirun SIGKILL → launcher exited (ranks gone, files removed)', t.mpirun),
  ];
}

async function main(): Promise<void> {
  const raw: number[] = [];
  const ready: number[] = [];
  const load: number[] = [];
  const overhead: number[] = [];
  const teardown: number[] = [];
  const ends = { killed: [] as number[], free: [] as number[], mpirun: [] as number[] };
  if (!ONLY_TEARDOWN) await rawMpirun();  // warm the page cache for mpirun and node, as the launcher runs below will be
  for (let i = 0; i < RUNS; i += 1) {
    let line = '';
    if (!ONLY_TEARDOWN) {
      raw.push(await rawMpirun());
      const r = await launchToReady();
      ready.push(r.ready);
      load.push(r.load);
      overhead.push(r.ready - r.load);
      teardown.push(await crashToGone());
      line = `raw mpirun ${raw.at(-1)!.toFixed(3)} s, ready ${r.ready.toFixed(3)} s (load ${r.load.toFixed(3)} s), teardown ${teardown.at(-1)!.toFixed(3)} s, `;
    }
    process.stderr.write(`run ${i + 1}: ${line}${await teardownRun(ends)}\n`);
  }
  const lines = [
    `runs: ${RUNS}; node ${process.version}; ${(await execa('mpirun', ['--version'])).stdout.split('\n')[0]}`,
    '',
    '| measure (s) | best | median | goal |',
    '|---|---|---|---|',
    ...(ONLY_TEARDOWN ? [] : [
      row('raw `mpirun -np 2 --oversubscribe node -e \'\'`', raw),
      row('trtllm-launch launch → ready', ready),
      row('leader model load ("loaded ... in X s")', load),
      row('**launcher overhead** (ready − load)', overhead, '≤ 1.5'),
      `| overhead / raw mpirun | ${(best(overhead) / best(raw)).toFixed(2)}x | ${(median(overhead) / median(raw)).toFixed(2)}x | |`,
      row('**crash → all ranks gone** (SIGKILL a follower)', teardown, '≤ 2'),
    ]),
    ...teardownRows(ends),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
