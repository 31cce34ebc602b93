// What the launcher costs on top of mpirun: launch → ready of `trtllm-launch --world-size 2 --oversubscribe` on the
// tiny Llama minus the model load (the leader's "loaded ... in X s"), against a bare `mpirun -np 2 --oversubscribe
// node -e ''` measured in the same run; and crash → all ranks gone (SIGKILL a follower; until the launcher has
// exited and no rank, mpirun or orted of that cluster remains). Best and median of --runs (default 5).
//   node dist/bench/launcher-overhead.js [--runs 5]
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { median } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg >= 0 ? Number(process.argv[runsArg + 1]) : 5;
const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama');
const ROOT = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];

const seconds = (since: number) => (performance.now() - since) / 1000;
const best = (xs: number[]) => Math.min(...xs);

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

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

interface Cluster { child: ResultPromise; port: number; output: () => string; ready: Promise<number> }

function startCluster(port: number, metrics: number): Cluster {
  let all = '';
  const started = performance.now();
  const child = execa('node', [BIN, '--model', MODEL, '--world-size', '2', '--oversubscribe', '--http-port', String(port),
    '--metrics-port', String(metrics), '--threads', '1'], { reject: false, all: true });
  const ready = new Promise<number>((resolve, reject) => {
    child.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (all.includes('[launcher] ready after')) resolve(seconds(started));
    });
    void child.then(() => reject(new Error(`the cluster exited before ready:\n${all.slice(-2000)}`)));
  });
  return { child, port, output: () => all, ready };
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

async function main(): Promise<void> {
  await rawMpirun();  // warm the page cache for mpirun and node, as the launcher runs below will be
  const raw: number[] = [];
  const ready: number[] = [];
  const load: number[] = [];
  const overhead: number[] = [];
  const teardown: number[] = [];
  for (let i = 0; i < RUNS; i += 1) {
    raw.push(await rawMpirun());
    const r = await launchToReady();
    ready.push(r.ready);
    load.push(r.load);
    overhead.push(r.ready - r.load);
    teardown.push(await crashToGone());
    process.stderr.write(`run ${i + 1}: raw mpirun ${raw.at(-1)!.toFixed(3)} s, ready ${r.ready.toFixed(3)} s (load ${r.load.toFixed(3)} s), teardown ${teardown.at(-1)!.toFixed(3)} s\n`);
  }
  const row = (name: string, xs: number[], goal = '') => `| ${name} | ${best(xs).toFixed(3)} | ${median(xs).toFixed(3)} | ${goal} |`;
  const lines = [
    `runs: ${RUNS}; node ${process.version}; ${(await execa('mpirun', ['--version'])).stdout.split('\n')[0]}`,
    '',
    '| measure (s) | best | median | goal |',
    '|---|---|---|---|',
    row('raw `mpirun -np 2 --oversubscribe node -e \'\'`', raw),
    row('trtllm-launch launch → ready', ready),
    row('leader model load ("loaded ... in X s")', load),
    row('**launcher overhead** (ready − load)', overhead, '≤ 1.5'),
    `| overhead / raw mpirun | ${(best(overhead) / best(raw)).toFixed(2)}x | ${(median(overhead) / median(raw)).toFixed(2)}x | |`,
    row('**crash → all ranks gone** (SIGKILL a follower)', teardown, '≤ 2'),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
