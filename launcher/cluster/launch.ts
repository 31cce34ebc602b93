// `trtllm-launch --world-size N`: plan the mpirun command for N ranks of `trtllm-launch rank`, check the ports,
// print it (--dry-run) or run and supervise it.
import { accessSync, constants, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import { delimiter, join } from 'node:path';

import { execa } from 'execa';

import { TrtllmError } from '../../worker/common/errors.js';
import { packageRoot } from '../../worker/common/package-root.js';
import { SRUN_MARKER } from '../../worker/rank.js';
import { type MpirunCommand, mpiFlavor, mpirunCommand, shellQuote, splitArgs, srunCommand, srunMpiPlugin } from './mpirun-command.js';
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
  /** Extra srun arguments for the rank step (site flags, pyxis's --container-image=...). */
  srunArgs?: string | undefined;
  /** Orchestrator mode (--multi-model): what every process runs instead of `rank`, and how the job is shown. */
  orchestrated?: OrchestratedJob;
}

export interface OrchestratedJob {
  np: number;                        // processes mpirun/srun starts (1 when the orchestrator spawns the groups)
  env: Record<string, string>;       // the plan, forwarded to every process (spawned ones too)
  roles: string[];                   // one line per started process, for --dry-run
  banner: (host: string) => string[];
  spawned: number;                   // ranks the orchestrator spawns itself (0 with --no-spawn)
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
  const plugin = srunMpiPlugin(list.all);
  if (plugin === 'none') {
    throw new TrtllmError(`--launcher srun: this Slurm offers neither pmix nor pmi2 (\`srun --mpi=list\` said: ${list.all.trim().replace(/\s+/g, ' ').slice(0, 300)}); ` +
      'the ranks could not join one MPI world. Ask your administrator for the pmix plugin, or use --launcher mpirun inside the allocation', 'unsupported');
  }
  return { path, plugin };
}

/** The rank step's drain request when the leader runs on another node (see superviseCluster). */
function signalStep(step: string): void {
  const scancel = onPath('scancel');
  if (scancel) void execa(scancel, ['--signal=TERM', step], { reject: false });
}

/** Under srun, a node's name as Slurm reaches it (NodeAddr): where names do not resolve from the launcher's host
 * (a login node, say), the address still does. Looked up once per node, in the background; the name meanwhile. */
function slurmAddresses(): (node: string) => string {
  const known = new Map<string, string>();
  const scontrol = onPath('scontrol');
  return (node) => {
    if (!known.has(node)) {
      known.set(node, node);
      if (scontrol) {
        void execa(scontrol, ['show', 'node', '-o', node], { reject: false }).then((r) => {
          const addr = / NodeAddr=(\S+)/.exec(r.stdout ?? '')?.[1];
          if (addr) known.set(node, addr);
        });
      }
    }
    return known.get(node)!;
  };
}

/** Under srun: the job's --cpus-per-task (srun no longer passes it on by itself), also the ranks' default --threads. */
function slurmCpusPerTask(): number | undefined {
  const v = process.env.SLURM_CPUS_PER_TASK;
  return v !== undefined && /^\d+$/.test(v) && Number(v) > 0 ? Number(v) : undefined;
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
  const job = options.orchestrated;
  const srunArgs = splitArgs(options.srunArgs ?? '');
  // In a pyxis/enroot container the ranks find node on the image's PATH; this package must be mounted at the same
  // path there (slurm/README.md, "Containers").
  const node = launcher === 'srun' && srunArgs.some((a) => a.startsWith('--container-image')) ? 'node' : process.execPath;
  const rankArgv = job ? [node, bin, 'orchestrated'] : [node, bin, 'rank', '--tp', String(tp), '--pp', String(pp), ...options.rankOptions];
  const cpusPerTask = launcher === 'srun' ? slurmCpusPerTask() : undefined;
  if (!job && cpusPerTask !== undefined && !options.rankOptions.includes('--threads')) rankArgv.push('--threads', String(cpusPerTask));
  const env: Record<string, string> = { OMP_NUM_THREADS: process.env.OMP_NUM_THREADS ?? '1', ...job?.env };
  if (launcher === 'srun') env[SRUN_MARKER] = 'srun';
  const np = job ? job.np : worldSize;
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
    command = srunCommand({ srun: srun.path, np, mpiPlugin: srun.plugin, cpusPerTask, extraArgs: srunArgs, rankArgv, survive: job !== undefined });
  } else {
    const [mpirun] = await Promise.all([findMpirun(), ...checks]);
    command = mpirunCommand({
      flavor: mpiFlavor(mpirun.version), mpirun: mpirun.path, np, isRoot: process.getuid?.() === 0,
      oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts, survive: job !== undefined,
      forwardEnv: [...FORWARDED, ...Object.keys(job?.env ?? {})].filter((name) => (env[name] ?? process.env[name]) !== undefined), rankArgv,
    });
  }
  if (options.dryRun) {
    process.stdout.write(`${shellQuote([command.file, ...command.args])}\n`);
    if (job) {
      for (const line of job.roles) process.stdout.write(`${line}\n`);
      return 0;
    }
    for (let rank = 0; rank < worldSize; rank += 1) {
      const grpc = options.grpcPort === undefined ? '' : `, gRPC :${options.grpcPort}`;
      const role = rank === 0 ? `leader: HTTP ${options.host}:${options.httpPort}${grpc}, metrics :${options.metricsPort}` : 'follower: no ports';
      process.stdout.write(`rank ${rank}: tp_rank ${rank % tp}, pp_rank ${Math.floor(rank / tp)}; ${role}; env OMP_NUM_THREADS=${env.OMP_NUM_THREADS}\n`);
    }
    return 0;
  }
  const local = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  // Under Slurm the endpoint is read on a login node (trtllm-launch slurm submit): name this node, not localhost.
  const shown = local !== '127.0.0.1' ? local : launcher === 'srun' ? hostname() : 'localhost';
  const addressOf = launcher === 'srun' ? slurmAddresses() : (host: string) => host;
  return superviseCluster({
    file: command.file, args: command.args, env, worldSize: np, launcher,
    ...(job && job.spawned > 0 ? { ranksShown: `${np} rank(s) + ${job.spawned} spawned` } : {}),
    ...(job ? { leaderReportsExit: true } : {}),
    // The orchestrator opens its port once every model is up or failed: live means started; ready means all models.
    readyUrl: (leaderHost) => `http://${leaderHost === undefined ? local : addressOf(leaderHost)}:${options.httpPort}/v2/health/${job ? 'live' : 'ready'}`,
    readyBanner: (leaderHost) => job ? job.banner(leaderHost ?? shown) : [
      `serving on http://${leaderHost ?? shown}:${options.httpPort} (tp ${tp} x pp ${pp}), metrics on http://${leaderHost ?? shown}:${options.metricsPort}/metrics`,
      `  curl -X POST ${leaderHost ?? shown}:${options.httpPort}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
      launcher === 'srun' && process.env.SLURM_JOB_ID
        ? `  Ctrl-C (from a login node: trtllm-launch slurm stop ${process.env.SLURM_JOB_ID}) drains and stops every rank`
        : '  Ctrl-C drains and stops every rank',
    ],
    startupTimeoutMs: options.startupTimeoutSeconds * 1000,
    drainTimeoutMs: options.drainTimeoutSeconds * 1000,
    logDir: options.logDir,
    signalLeaderStep: signalStep,
  });
}
