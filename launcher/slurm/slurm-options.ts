// The options of `trtllm-launch slurm render|submit` that describe the job rather than the serving: what to ask
// Slurm for, where the output goes, containers, and how the node starts trtllm-launch. Each has a TRTLLM_SLURM_*
// env fallback (sbatch's own SBATCH_ACCOUNT, SBATCH_PARTITION, ... still apply when a directive is switched off).
import { join } from 'node:path';

import { type Command, Option } from 'commander';

import { packageRoot } from '../../worker/common/package-root.js';
import { shellQuote } from '../cluster/mpirun-command.js';
import { parseIntOption } from '../parse-options.js';
import type { SlurmJobOptions } from './job-plan.js';

export interface SlurmCliOptions extends SlurmJobOptions {
  launchCommand?: string | undefined;
}

export interface FollowCliOptions {
  follow: boolean;
  followTimeout: number;
}

// --help says "env: TRTLLM_X" itself (commander, from .env()).
function option(flags: string, description: string, env: string): Option {
  return new Option(flags, description).env(env);
}

/** The command line that starts this very installation on a node (it must sit on a filesystem the nodes share). */
export function thisInstallation(): string {
  return shellQuote([process.execPath, join(packageRoot(), 'bin', 'trtllm-launch.js')]);
}

export function addSlurmJobOptions(command: Command): Command {
  return command
    .addOption(option('--job-name <name>', 'Slurm job name (%x in file names)', 'TRTLLM_SLURM_JOB_NAME').default('trtllm-serve'))
    .addOption(option('--account <name>', 'Slurm account to charge (default: your default account)', 'TRTLLM_SLURM_ACCOUNT'))
    .addOption(option('--partition <name>', 'Slurm partition (default: the cluster\'s default partition)', 'TRTLLM_SLURM_PARTITION'))
    .addOption(option('--time <limit>', 'wall-clock limit: minutes, HH:MM:SS or D-HH:MM:SS; the launcher drains --drain-timeout + 30 s before it', 'TRTLLM_SLURM_TIME').default('00:30:00'))
    .addOption(option('--nodes <n>', 'nodes; the ranks (tp x pp) are spread evenly over them', 'TRTLLM_SLURM_NODES').argParser(parseIntOption('--nodes', 1)).default(1))
    .addOption(option('--gpus-per-node <n>', 'GPUs per node (default: one per rank with --device cuda, else none)', 'TRTLLM_SLURM_GPUS_PER_NODE').argParser(parseIntOption('--gpus-per-node', 0)))
    .addOption(option('--cpus-per-task <n>', 'CPU cores per rank (default: --threads when given)', 'TRTLLM_SLURM_CPUS_PER_TASK').argParser(parseIntOption('--cpus-per-task', 1)))
    .addOption(option('--output-dir <dir>', 'where the job\'s output file (<job name>-<job id>.out) and rank logs go, relative to where you submit', 'TRTLLM_SLURM_OUTPUT_DIR').default('slurm-logs'))
    .addOption(option('--sbatch-arg <option>', 'one more #SBATCH line, e.g. --sbatch-arg=--exclusive (repeatable)', 'TRTLLM_SLURM_SBATCH_ARG')
      .argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]).default([]))
    .addOption(option('--container-image <image>', 'run the ranks in this container (pyxis: srun --container-image)', 'TRTLLM_SLURM_CONTAINER_IMAGE'))
    .addOption(option('--container-mounts <list>', 'pyxis --container-mounts (src:dst,...); mount this package at its own path', 'TRTLLM_SLURM_CONTAINER_MOUNTS'))
    .addOption(option('--container-workdir <dir>', 'pyxis --container-workdir', 'TRTLLM_SLURM_CONTAINER_WORKDIR'))
    .addOption(option('--launch-command <words>', `how the node starts trtllm-launch (default: this installation, ${thisInstallation()})`, 'TRTLLM_SLURM_LAUNCH_COMMAND'));
}

export function addFollowOptions(command: Command, what: string): Command {
  return command
    .addOption(new Option('--no-follow', `return at once instead of following the job ${what}`))
    .addOption(option('--follow-timeout <seconds>', `stop following after this long (0: until ${what})`, 'TRTLLM_SLURM_FOLLOW_TIMEOUT').argParser(parseIntOption('--follow-timeout', 0)).default(0));
}
