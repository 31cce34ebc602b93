// The lines a rank prints for the launcher to act on, written and read back here only: a rank formats them with these
// functions and the supervisor (launcher/cluster/supervise.ts) parses them with their counterparts, so the two sides
// cannot drift apart. Each line is one whole stdout line of rank 0 (mpirun/srun add their rank tags around it).

/** The leader listens: the supervisor checks readiness at once instead of at its next poll. */
export function readyLine(servedModelName: string, tritonNames: readonly string[]): string {
  return `ready: serving ${servedModelName} as ${tritonNames.join(', ')}`;
}

export function isReadyLine(text: string): boolean {
  return text.startsWith('ready: serving ');
}

/** Where the leader (or the orchestrator) runs: the supervisor drains it by this pid when it is on the same host. */
export function leaderPidLine(pid: number, host: string): string {
  return `leader pid ${pid} on ${host}`;
}

export function parseLeaderPid(text: string): { pid: number; host: string } | undefined {
  const m = /^leader pid (\d+) on (\S+)$/.exec(text);
  return m ? { pid: Number(m[1]), host: m[2]! } : undefined;
}

/** The orchestrator's own exit code: under mpirun --enable-recovery, mpirun's status says nothing about it. */
export function leaderExitLine(code: number): string {
  return `leader exit code ${code}`;
}

export function parseLeaderExit(text: string): number | undefined {
  const m = /^leader exit code (\d+)$/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A process of the cluster that cannot go on says why, as its last line, before it exits: the launcher puts the
 * first such line of any rank first in the root cause (launcher/cluster/supervise.ts). `role` is its command. */
export function rankFailureLine(role: string, message: string): string {
  return `trtllm-launch ${role}: ${message}`;
}

/** The failure a rank's or the orchestrator's line reports, or undefined for any other line. */
export function parseRankFailure(text: string): string | undefined {
  return /^trtllm-launch (?:rank|orchestrated): (.+)$/.exec(text)?.[1];
}

/** Where an srun task landed (every rank says it); rank 0's step is what the supervisor signals on another node. */
export interface SlurmStepReport {
  jobId: string;
  stepId: string;
  procId: number;
  tasks: number;
  node: string;
  localId: number;
  worldRank: number;
  device: string;
}

export function slurmStepLine(r: SlurmStepReport): string {
  return `slurm step ${r.jobId}.${r.stepId}: task ${r.procId} of ${r.tasks} on ${r.node} (local ${r.localId}) = MPI rank ${r.worldRank}, device ${r.device}`;
}

/** The step ("4242.0") of a slurm step line, or undefined for any other line. */
export function parseSlurmStep(text: string): string | undefined {
  return /^slurm step (\d+\.\d+): /.exec(text)?.[1];
}
