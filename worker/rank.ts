// Which rank this process is: MPI is started only when an MPI launcher (mpirun's ORTE/PRRTE, MPICH's hydra, or
// srun with a PMI plugin) left its environment behind, so a plain `node` start never tries to reach a runtime.
// Under the launcher's srun, Slurm's own numbering (SLURM_PROCID, SLURM_LOCALID) is checked against MPI's, because a
// plugin mismatch makes every task start as a world of one — and every one of them would then serve as rank 0.
import type { CommInfo } from './binding/addon-types.js';
import { TrtllmError } from './common/errors.js';
import { loadAddon } from './binding/load-addon.js';
import { slurmStepLine } from './common/status-lines.js';

const MPI_ENV_HINTS = ['OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK', 'PMI_RANK'] as const;

/** Set by the launcher on the ranks it starts with srun (not by a user's own mpirun inside an allocation, whose
 * ranks carry the SLURM_* numbering of mpirun's daemons rather than their own). */
export const SRUN_MARKER = 'TRTLLM_RANK_LAUNCHER';

/** True when an MPI launcher started this process (pure: reads only `env`). */
export function startedByMpi(env: NodeJS.ProcessEnv): boolean {
  return MPI_ENV_HINTS.some((name) => env[name] !== undefined);
}

/** One srun task as Slurm numbered it, and the device its local id maps to. */
export interface SlurmTask {
  jobId: string;
  stepId: string;
  procId: number;        // SLURM_PROCID: the task's global index = the MPI world rank
  localId: number;       // SLURM_LOCALID: index among the step's tasks on this node
  tasks: number;         // SLURM_STEP_NUM_TASKS (SLURM_NTASKS on older Slurm)
  node: string;          // SLURMD_NODENAME
  device: string;        // 'cpu', or 'cuda:<i>' among the GPUs this task sees
}

function intVar(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const v = env[name];
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined;
}

/** The task's numbering under srun, or undefined outside an srun step (pure). A task that sees several GPUs
 * (Slurm gave the node's GPUs to every task) takes the one at its local id; one that sees one (--gpus-per-task,
 * --gpu-bind=single:1) takes that one. */
export function slurmTask(env: NodeJS.ProcessEnv): SlurmTask | undefined {
  const procId = intVar(env, 'SLURM_PROCID');
  const localId = intVar(env, 'SLURM_LOCALID');
  const tasks = intVar(env, 'SLURM_STEP_NUM_TASKS') ?? intVar(env, 'SLURM_NTASKS');
  if (procId === undefined || localId === undefined || tasks === undefined || env.SLURM_STEP_ID === undefined) return undefined;
  const visible = (env.CUDA_VISIBLE_DEVICES ?? '').split(',').filter((d) => d !== '' && d !== 'NoDevFiles');
  const device = visible.length === 0 ? 'cpu' : `cuda:${visible.length === 1 ? 0 : localId % visible.length}`;
  return {
    jobId: env.SLURM_JOB_ID ?? '?', stepId: env.SLURM_STEP_ID, procId, localId, tasks,
    node: env.SLURMD_NODENAME ?? '?', device,
  };
}

/** Refuses a rank whose MPI world disagrees with the srun step that started it (pure). */
export function checkSlurmTask(info: CommInfo, task: SlurmTask, plugin: string | undefined): void {
  if (info.worldSize !== task.tasks) {
    throw new TrtllmError(
      `srun started ${task.tasks} tasks but MPI sees a world of ${info.worldSize} (srun --mpi=${plugin ?? 'none'}): ` +
      'this MPI library could not join the tasks through that plugin. Check `srun --mpi=list`, pick one your MPI ' +
      'was built with (Open MPI: pmix), or see slurm/README.md, "PMIx troubleshooting"', 'unsupported');
  }
  if (info.worldRank !== task.procId) {
    throw new TrtllmError(`srun task ${task.procId} became MPI rank ${info.worldRank}: the MPI plugin numbers tasks differently from Slurm; use --mpi=pmix`, 'unsupported');
  }
}

/** Starts MPI when this process is one of several ranks; a single-rank CommInfo otherwise. */
export function initRank(env: NodeJS.ProcessEnv = process.env): CommInfo {
  const info = loadAddon().commInit(startedByMpi(env));
  const task = env[SRUN_MARKER] === 'srun' ? slurmTask(env) : undefined;
  if (task) {
    checkSlurmTask(info, task, env.SLURM_MPI_TYPE);
    // Every rank says where it landed: the first thing to read when a multi-node job misbehaves. Rank 0's line
    // also tells the launcher which step to signal when the leader runs on another node.
    process.stdout.write(`${slurmStepLine({ ...task, worldRank: info.worldRank })}\n`);
  }
  return info;
}
