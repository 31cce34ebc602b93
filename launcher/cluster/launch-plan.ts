// What `trtllm-launch --world-size N` will run, decided without touching the machine (pure): the mpirun/srun program
// and arguments, the environment every rank gets, the lines --dry-run prints, and what the supervisor needs to say
// and check once the ranks run. launch.ts gathers the facts (which mpirun or srun, root or not, the environment) and
// does the I/O; everything that can be decided from those facts is decided here, so it is tested without MPI.
import { join } from 'node:path';

import { LAUNCHER_ENV, LIFELINE_STDIN_ENV } from '../../worker/common/launcher-identity.js';
import { SRUN_MARKER } from '../../worker/rank.js';
import { servingLine } from './launcher-lines.js';
import { type MpiFlavor, type MpirunCommand, mpirunCommand, shellQuote, splitArgs, srunCommand } from './mpirun-command.js';
import type { ExpertPlan, ParallelPlan } from './parallel-plan.js';

/** The options of a cluster launch that decide its command (launch.ts's ClusterOptions satisfies it). */
export interface LaunchPlanOptions {
  parallel: ParallelPlan;
  /** How a mixture-of-experts model's experts split over the tp ranks (--ep / --moe-tp); numExperts when the
   * launcher read the checkpoint. Absent: ep 1. */
  experts?: (ExpertPlan & { numExperts?: number | undefined }) | undefined;
  host: string;
  httpPort: number;
  metricsPort: number;
  grpcPort?: number | undefined;
  oversubscribe: boolean;
  hostfile?: string | undefined;
  hosts?: string | undefined;
  /** The serve options every rank gets, already rendered as CLI arguments. */
  rankOptions: string[];
  /** Extra srun arguments for the rank step (site flags, pyxis's --container-image=...). */
  srunArgs?: string | undefined;
  /** Orchestrator mode (--multi-model): what every process runs instead of `rank`, and how the job is shown. */
  orchestrated?: OrchestratedJob | undefined;
}

export interface OrchestratedJob {
  np: number;                        // processes mpirun/srun starts (1 when the orchestrator spawns the groups)
  env: Record<string, string>;       // the plan, forwarded to every process (spawned ones too)
  roles: string[];                   // one line per started process, for --dry-run
  banner: (host: string) => string[];
  spawned: number;                   // ranks the orchestrator spawns itself (0 with --no-spawn)
}

/** The program that starts the ranks, as found on this machine. */
export type RankStarter =
  | { kind: 'mpirun'; path: string; flavor: MpiFlavor }
  | { kind: 'srun'; path: string; plugin: string };   // plugin: what `srun --mpi=list` offers (pmix, else pmi2)

/** What launch.ts discovered about this machine and process: the only inputs of the plan besides the options. */
export interface LaunchFacts {
  starter: RankStarter;
  packageRoot: string;               // where bin/trtllm-launch.js lives
  nodePath: string;                  // this node binary (process.execPath)
  isRoot: boolean;                   // Open MPI refuses root without --allow-run-as-root
  hostname: string;                  // this host, as the endpoint is shown under srun
  env: Readonly<Record<string, string | undefined>>;   // the launcher's environment (OMP_NUM_THREADS, SLURM_*)
  setpriv?: string | undefined;      // util-linux setpriv with --pdeathsig, when found: srun runs under it
  launcherIdentity?: string | undefined;  // host:pid:start time of this launcher, for its ranks (TRTLLM_LAUNCHED_BY)
}

export interface LaunchPlan {
  file: string;
  args: string[];
  /** Set on top of the launcher's own environment for mpirun/srun (and so for every rank). */
  env: Record<string, string>;
  np: number;                        // processes mpirun/srun starts
  launcher: 'mpirun' | 'srun';
  /** --dry-run's output: the command, pasteable, then one line per process. */
  dryRunLines: string[];
  /** The supervisor's ready line counts this, when it is not just np ("1 rank(s) + 3 spawned"). */
  ranksShown?: string;
  /** Orchestrator mode: mpirun --enable-recovery's exit status is not the job's; the leader reports its own. */
  leaderReportsExit: boolean;
  /** mpirun's stdin is a pipe the launcher holds open and never writes: the launcher's lifeline (worker/lifeline.ts). */
  stdinLifeline: boolean;
  /** The leader's health URL, given its address (undefined: it runs here, or has not said where it runs). */
  readyUrl: (leaderAddress: string | undefined) => string;
  /** The lines printed once the leader is ready, given the host it reported (undefined: this host). */
  readyBanner: (leaderHost: string | undefined) => string[];
}

// Variables every rank must see, whatever the MPI forwards by default.
// (TRTLLM_ALL_REDUCE: every rank of a tp group must take the same all-reduce path; TRTLLM_PEER_BLOCKS: the group's
// first rank, wherever it runs, sets the peer kernels' grid — comm/all-reduce-plan.h.)
const FORWARDED = ['PATH', 'LD_LIBRARY_PATH', 'OMP_NUM_THREADS', 'TRTLLM_ADDON_PATH', 'TRTLLM_API_KEY', 'TRTLLM_ALL_REDUCE',
  'TRTLLM_PEER_BLOCKS'];

/** Under srun: the job's --cpus-per-task (srun no longer passes it on by itself), also the ranks' default --threads. */
export function slurmCpusPerTask(env: LaunchFacts['env']): number | undefined {
  const v = env.SLURM_CPUS_PER_TASK;
  return v !== undefined && /^\d+$/.test(v) && Number(v) > 0 ? Number(v) : undefined;
}

/** The leader's ports to check free on this host before any rank starts, with the option that set each. Under srun
 * the leader may land on another node, so its ports are checked there (it fails to bind) rather than here. */
export function portChecks(options: LaunchPlanOptions, launcher: RankStarter['kind']): { port: number; option: string }[] {
  if (launcher === 'srun') return [];
  return [
    { port: options.httpPort, option: '--http-port' },
    { port: options.metricsPort, option: '--metrics-port' },
    ...(options.grpcPort === undefined ? [] : [{ port: options.grpcPort, option: '--grpc-port' }]),
  ];
}

/** srun under `setpriv --pdeathsig TERM`: the kernel sends it SIGTERM the moment the launcher exits, however the
 * launcher ends (kill -9 included), and srun answers every SIGTERM by SIGKILLing its tasks on every node. (The kernel
 * sends it once per launcher thread that exits — harmless to srun. Not for mpirun, which takes a second SIGTERM as
 * "force" and exits without removing its files: mpirun gets the stdin lifeline instead, worker/lifeline.ts.) */
export function underParentDeathSignal(setpriv: string, command: MpirunCommand): MpirunCommand {
  return { file: setpriv, args: ['--pdeathsig', 'TERM', command.file, ...command.args] };
}

/** A tp rank's share of the experts (TensorRT-LLM's mapping: ep rank = tp rank % ep, moe-tp rank = tp rank / ep). */
function expertsOf(tpRank: number, experts: LaunchPlanOptions['experts']): string {
  if (experts === undefined || experts.ep === 1) return '';
  const epRank = tpRank % experts.ep;
  const n = experts.numExperts === undefined ? undefined : experts.numExperts / experts.ep;
  const which = n === undefined ? '' : ` (experts ${epRank * n}-${(epRank + 1) * n - 1} of ${experts.numExperts})`;
  return `, ep_rank ${epRank}${which}, moe_tp_rank ${Math.floor(tpRank / experts.ep)} of ${experts.moeTp}`;
}

/** The whole launch, decided from the options and the facts alone: the same inputs always give the same command. */
export function planLaunch(options: LaunchPlanOptions, facts: LaunchFacts): LaunchPlan {
  const { worldSize, tp, pp } = options.parallel;
  const { starter } = facts;
  const launcher = starter.kind;
  const bin = join(facts.packageRoot, 'bin', 'trtllm-launch.js');
  const job = options.orchestrated;
  const srunArgs = splitArgs(options.srunArgs ?? '');
  // In a pyxis/enroot container the ranks find node on the image's PATH; this package must be mounted at the same
  // path there (slurm/README.md, "Containers").
  const node = launcher === 'srun' && srunArgs.some((a) => a.startsWith('--container-image')) ? 'node' : facts.nodePath;
  const rankArgv = job ? [node, bin, 'orchestrated'] : [node, bin, 'rank', '--tp', String(tp), '--pp', String(pp), ...options.rankOptions];
  const cpusPerTask = launcher === 'srun' ? slurmCpusPerTask(facts.env) : undefined;
  if (!job && cpusPerTask !== undefined && !options.rankOptions.includes('--threads')) rankArgv.push('--threads', String(cpusPerTask));
  const env: Record<string, string> = { OMP_NUM_THREADS: facts.env.OMP_NUM_THREADS ?? '1', ...job?.env };
  if (launcher === 'srun') env[SRUN_MARKER] = 'srun';
  // Ranks on this host watch the launcher by it, and the launcher finds what is left of its job by it
  // (worker/lifeline.ts). Not forwarded with -x: ranks on other hosts cannot watch a pid of this one.
  if (facts.launcherIdentity !== undefined) env[LAUNCHER_ENV] = facts.launcherIdentity;
  // mpirun forwards its stdin to rank 0 on whatever host: the launcher's death reaches the job through it, once.
  const stdinLifeline = launcher === 'mpirun' && facts.launcherIdentity !== undefined;
  if (stdinLifeline) env[LIFELINE_STDIN_ENV] = '1';
  const np = job ? job.np : worldSize;
  const started = starter.kind === 'srun'
    ? srunCommand({ srun: starter.path, np, mpiPlugin: starter.plugin, cpusPerTask, extraArgs: srunArgs, rankArgv, survive: job !== undefined })
    : mpirunCommand({
      flavor: starter.flavor, mpirun: starter.path, np, isRoot: facts.isRoot,
      oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts, survive: job !== undefined,
      forwardEnv: [...FORWARDED, ...Object.keys(job?.env ?? {})].filter((name) => (env[name] ?? facts.env[name]) !== undefined), rankArgv,
    });
  const command = launcher === 'srun' && facts.setpriv !== undefined ? underParentDeathSignal(facts.setpriv, started) : started;

  const grpc = options.grpcPort === undefined ? '' : `, gRPC :${options.grpcPort}`;
  const roles = job ? job.roles : Array.from({ length: worldSize }, (_, rank) => {
    const role = rank === 0 ? `leader: HTTP ${options.host}:${options.httpPort}${grpc}, metrics :${options.metricsPort}` : 'follower: no ports';
    return `rank ${rank}: tp_rank ${rank % tp}, pp_rank ${Math.floor(rank / tp)}${expertsOf(rank % tp, options.experts)}; ${role}; env OMP_NUM_THREADS=${env.OMP_NUM_THREADS}`;
  });

  const local = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  // Under Slurm the endpoint is read on a login node (trtllm-launch slurm submit): name this node, not localhost.
  const shown = local !== '127.0.0.1' ? local : launcher === 'srun' ? facts.hostname : 'localhost';
  const jobId = facts.env.SLURM_JOB_ID;
  return {
    file: command.file, args: command.args, env, np, launcher,
    dryRunLines: [shellQuote([command.file, ...command.args]), ...roles],
    ...(job && job.spawned > 0 ? { ranksShown: `${np} rank(s) + ${job.spawned} spawned` } : {}),
    leaderReportsExit: job !== undefined,
    stdinLifeline,
    // The orchestrator opens its port once every model is up or failed: live means started; ready means all models.
    readyUrl: (leaderAddress) => `http://${leaderAddress ?? local}:${options.httpPort}/v2/health/${job ? 'live' : 'ready'}`,
    readyBanner: (leaderHost) => job ? job.banner(leaderHost ?? shown) : [
      servingLine(leaderHost ?? shown, options.httpPort, tp, pp, options.metricsPort),
      `  curl -X POST ${leaderHost ?? shown}:${options.httpPort}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
      launcher === 'srun' && jobId
        ? `  Ctrl-C (from a login node: trtllm-launch slurm stop ${jobId}) drains and stops every rank`
        : '  Ctrl-C drains and stops every rank',
    ],
  };
}
