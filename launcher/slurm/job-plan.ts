// What a serving job asks Slurm for, from the sbatch options and the serve options (pure): one task per rank,
// the same number on every node, a drain signal inside the time limit. Every refusal names the option and value.
import { InvalidArgumentError } from 'commander';

import type { ParallelPlan } from '../cluster/parallel-plan.js';
import { parseTimeLimit } from './time-limit.js';

export interface SlurmJobOptions {
  jobName: string;
  account?: string | undefined;
  partition?: string | undefined;
  time: string;
  nodes: number;
  gpusPerNode?: number | undefined;
  cpusPerTask?: number | undefined;
  outputDir: string;
  sbatchArg: string[];
  containerImage?: string | undefined;
  containerMounts?: string | undefined;
  containerWorkdir?: string | undefined;
}

/** The serve settings the job plan depends on. */
export interface ServeFacts {
  parallel: ParallelPlan;  // one replica's grid
  /** --dp: replicas of the model, each `parallel`, behind an orchestrator task (rank 0); undefined or 1: none. */
  dp?: number | undefined;
  device: 'auto' | 'cpu' | 'cuda';
  threads?: number | undefined;
  drainTimeout: number;
  httpPort: number;
  metricsPort: number;
  srunArgs?: string | undefined;
}

export interface JobPlan {
  jobName: string;
  account?: string | undefined;
  partition?: string | undefined;
  nodes: number;
  tasksPerNode: number;
  gpusPerNode?: number | undefined;
  cpusPerTask?: number | undefined;
  time: string;
  /** Seconds before the limit at which Slurm sends the launcher SIGTERM; undefined for an unlimited job. */
  signalSeconds?: number | undefined;
  outputDir: string;
  extraDirectives: string[];
  srunArgs?: string | undefined;
  serve: ServeFacts;
}

// The drain gets the launcher's --drain-timeout plus this margin for the ranks to exit and Slurm to notice.
export const DRAIN_MARGIN_SECONDS = 30;

function singleWord(option: string, value: string): string {
  if (value === '' || /[\s"'\\$`]/.test(value)) {
    throw new InvalidArgumentError(`${option} must be one word without spaces, quotes, \\ $ or \`, got "${value}"`);
  }
  return value;
}

export function planJob(o: SlurmJobOptions, serve: ServeFacts): JobPlan {
  const { worldSize, tp, pp } = serve.parallel;
  const dp = serve.dp ?? 1;
  if (!Number.isInteger(o.nodes) || o.nodes < 1) throw new InvalidArgumentError(`--nodes must be an integer >= 1, got "${o.nodes}"`);
  // --dp: the orchestrator is one more task, on the first node; every node gets a task slot more than its ranks (the
  // launcher lays the tasks out so that only the first node's is used: dp-node-layout.ts).
  if (dp > 1 && (dp * worldSize) % o.nodes !== 0) {
    throw new InvalidArgumentError(`--nodes ${o.nodes} does not divide --dp ${dp} x tp ${tp} x pp ${pp} = ${dp * worldSize} ranks: every node runs the same number of ranks`);
  }
  if (dp === 1 && worldSize % o.nodes !== 0) {
    throw new InvalidArgumentError(`--nodes ${o.nodes} does not divide tp ${tp} x pp ${pp} = ${worldSize} ranks: every node runs the same number of ranks`);
  }
  const ranksPerNode = (dp * worldSize) / o.nodes;  // the model's ranks (one GPU each)
  const tasksPerNode = ranksPerNode + (dp > 1 ? 1 : 0);
  let gpusPerNode = o.gpusPerNode;
  if (gpusPerNode === undefined && serve.device === 'cuda') gpusPerNode = ranksPerNode;
  if (gpusPerNode !== undefined && gpusPerNode !== 0 && gpusPerNode < ranksPerNode) {
    throw new InvalidArgumentError(`--gpus-per-node ${gpusPerNode} is fewer than the ${ranksPerNode} ranks per node (one GPU per rank); use --gpus-per-node ${ranksPerNode}${dp > 1 ? '' : ' or more nodes'}`);
  }
  const limit = parseTimeLimit(o.time);
  let signalSeconds: number | undefined;
  if (Number.isFinite(limit)) {
    signalSeconds = serve.drainTimeout + DRAIN_MARGIN_SECONDS;
    if (signalSeconds > 65535) throw new InvalidArgumentError(`--drain-timeout ${serve.drainTimeout} is too long for Slurm's --signal (at most ${65535 - DRAIN_MARGIN_SECONDS} s)`);
    if (limit <= signalSeconds) {
      throw new InvalidArgumentError(`--time ${o.time} (${limit} s) leaves no time to serve: the launcher is asked to drain ${signalSeconds} s before the limit ` +
        `(--drain-timeout ${serve.drainTimeout} + ${DRAIN_MARGIN_SECONDS} s); give a longer --time or a shorter --drain-timeout`);
    }
  }
  for (const arg of o.sbatchArg) {
    if (!arg.startsWith('-') || /[\r\n]/.test(arg)) throw new InvalidArgumentError(`--sbatch-arg must be one sbatch option such as "--exclusive" or "--qos=high", got "${arg}"`);
  }
  const container: string[] = [];
  if (o.containerImage !== undefined) container.push(`--container-image=${singleWord('--container-image', o.containerImage)}`);
  if (o.containerMounts !== undefined) container.push(`--container-mounts=${singleWord('--container-mounts', o.containerMounts)}`);
  if (o.containerWorkdir !== undefined) container.push(`--container-workdir=${singleWord('--container-workdir', o.containerWorkdir)}`);
  if (container.length > 0 && o.containerImage === undefined) {
    throw new InvalidArgumentError(`${container[0]!.split('=')[0]} needs --container-image: pyxis starts a container only from an image`);
  }
  const srunArgs = [serve.srunArgs, ...container].filter((a) => a !== undefined && a !== '').join(' ') || undefined;
  return {
    jobName: singleWord('--job-name', o.jobName),
    account: o.account === undefined ? undefined : singleWord('--account', o.account),
    partition: o.partition === undefined ? undefined : singleWord('--partition', o.partition),
    nodes: o.nodes, tasksPerNode, gpusPerNode: gpusPerNode === 0 ? undefined : gpusPerNode,
    cpusPerTask: o.cpusPerTask ?? serve.threads,
    time: o.time.trim(), signalSeconds,
    outputDir: singleWord('--output-dir', o.outputDir),
    extraDirectives: o.sbatchArg, srunArgs, serve,
  };
}
