// `trtllm-launch --world-size N`: plan the mpirun command for N ranks of `trtllm-launch rank`, check the ports,
// print it (--dry-run) or run and supervise it.
import { accessSync, constants, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

import { execa } from 'execa';

import { TrtllmError } from '../../worker/binding/errors.js';
import { packageRoot } from '../../worker/binding/load-addon.js';
import { type MpirunCommand, mpiFlavor, mpirunCommand, shellQuote, srunCommand, srunMpiPlugin } from './mpirun-command.js';
import type { ParallelPlan } from './parallel-plan.js';
import { superviseCluster } from './supervise.js';

export interface ClusterOptions {
  parallel: ParallelPlan;
  host: string;
  httpPort: number;
  metricsPort: number;
  grpcPort?: number | undefined;
  oversubscribe: boolean;
  hostfile?: string | undefined;
  hosts?: string | undefined;
  startupTimeoutSeconds: number;
  drainTimeoutSeconds: number;
  logDir?: string | undefined;
  dryRun: boolean;
  /** The serve options every rank gets, already rendered as CLI arguments. */
  rankOptions: string[];
  launcher?: 'mpirun' | 'srun';
}

// Variables every rank must see, whatever the MPI forwards by default.
const FORWARDED = ['PATH', 'LD_LIBRARY_PATH', 'OMP_NUM_THREADS', 'TRTLLM_ADDON_PATH', 'TRTLLM_API_KEY'];

/** Fails before any rank starts when a port is taken (by another cluster, typically). */
async function checkPortFree(host: string, port: number, option: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(new TrtllmError(
        `${option} ${port} on ${host} is not free (${error.code}); another cluster may be running there: stop it or pick another port`,
        'invalid_argument',
      ));
    });
    server.listen(port, host, () => server.close(() => resolve()));
  });
}

/** mpirun on PATH, looked up here rather than by a shell: one process less on the way to ready. */
function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** srun and the MPI plugin this Slurm offers (pmix, else pmi2), inside an allocation. */
async function findSrun(): Promise<{ path: string; plugin: string }> {
  const path = onPath('srun');
  if (!path) {
    throw new TrtllmError('--launcher srun: srun is not on PATH; run inside a Slurm allocation (salloc/sbatch) or use --launcher mpirun', 'not_found');
  }
  const list = await execa(path, ['--mpi=list'], { reject: false, all: true });
  return { path, plugin: srunMpiPlugin(list.all) };
}

async function findMpirun(): Promise<{ path: string; version: string }> {
  const path = onPath('mpirun');
  if (!path) {
    throw new TrtllmError('mpirun is not on PATH: install Open MPI (apt-get install openmpi-bin) or use --launcher none with --world-size 1', 'not_found');
  }
  const version = await execa(path, ['--version'], { reject: false, all: true });
  return { path, version: version.all };
}

export async function launchCluster(options: ClusterOptions): Promise<number> {
  const { worldSize, tp, pp } = options.parallel;
  const launcher = options.launcher ?? 'mpirun';
  const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
  const rankArgv = [process.execPath, bin, 'rank', '--tp', String(tp), '--pp', String(pp), ...options.rankOptions];
  const env: Record<string, string> = { OMP_NUM_THREADS: process.env.OMP_NUM_THREADS ?? '1' };
  // The port checks overlap finding the launcher; both finish before any rank starts. Under srun the leader may
  // land on another node, so its ports are checked there (it fails to bind) rather than here.
  const checks = options.dryRun || launcher === 'srun' ? [] : [
    checkPortFree(options.host, options.httpPort, '--http-port'),
    checkPortFree(options.host, options.metricsPort, '--metrics-port'),
    ...(options.grpcPort === undefined ? [] : [checkPortFree(options.host, options.grpcPort, '--grpc-port')]),
  ];
  let command: MpirunCommand;
  if (launcher === 'srun') {
    const [srun] = await Promise.all([findSrun(), ...checks]);
    command = srunCommand({ srun: srun.path, np: worldSize, mpiPlugin: srun.plugin, rankArgv });
  } else {
    const [mpirun] = await Promise.all([findMpirun(), ...checks]);
    command = mpirunCommand({
      flavor: mpiFlavor(mpirun.version), mpirun: mpirun.path, np: worldSize, isRoot: process.getuid?.() === 0,
      oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts,
      forwardEnv: FORWARDED.filter((name) => (env[name] ?? process.env[name]) !== undefined), rankArgv,
    });
  }
  if (options.dryRun) {
    process.stdout.write(`${shellQuote([command.file, ...command.args])}\n`);
    for (let rank = 0; rank < worldSize; rank += 1) {
      const grpc = options.grpcPort === undefined ? '' : `, gRPC :${options.grpcPort}`;
      const role = rank === 0 ? `leader: HTTP ${options.host}:${options.httpPort}${grpc}, metrics :${options.metricsPort}` : 'follower: no ports';
      process.stdout.write(`rank ${rank}: tp_rank ${rank % tp}, pp_rank ${Math.floor(rank / tp)}; ${role}; env OMP_NUM_THREADS=${env.OMP_NUM_THREADS}\n`);
    }
    return 0;
  }
  const local = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const shown = local === '127.0.0.1' ? 'localhost' : local;
  return superviseCluster({
    file: command.file, args: command.args, env, worldSize, launcher,
    readyUrl: (leaderHost) => `http://${leaderHost ?? local}:${options.httpPort}/v2/health/ready`,
    readyBanner: (leaderHost) => [
      `serving on http://${leaderHost ?? shown}:${options.httpPort} (tp ${tp} x pp ${pp}), metrics on http://${leaderHost ?? shown}:${options.metricsPort}/metrics`,
      `  curl -X POST ${leaderHost ?? shown}:${options.httpPort}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
      '  Ctrl-C drains and stops every rank',
    ],
    startupTimeoutMs: options.startupTimeoutSeconds * 1000,
    drainTimeoutMs: options.drainTimeoutSeconds * 1000,
    logDir: options.logDir,
  });
}
