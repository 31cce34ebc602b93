// What is left of a job on this host once its mpirun/srun has exited: whatever exit path brought it there (a forced
// stop, mpirun killed, a crash), no rank of it may keep running — serving, holding ports — and none of Open MPI's
// files of it may stay behind. Ranks are found by the launcher's identity in their environment (TRTLLM_LAUNCHED_BY,
// unique to this launcher: host, pid and start time), which every process of the job inherits and no other has.
import { readdirSync, readFileSync } from 'node:fs';

import { LAUNCHER_ENV } from '../../worker/common/launcher-identity.js';
import { removeOpenMpiFiles } from './open-mpi-files.js';

/** Live (non-zombie) processes of this host started with `TRTLLM_LAUNCHED_BY=<identity>`. */
export function jobProcesses(identity: string): number[] {
  const needle = `${LAUNCHER_ENV}=${identity}\0`;
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;   // dead, waiting to be reaped: holds nothing
      if (`\0${readFileSync(`/proc/${entry}/environ`, 'utf8')}`.includes(`\0${needle}`)) out.push(Number(entry));
    } catch {
      // gone meanwhile, or another user's
    }
  }
  return out;
}

/** SIGKILL to every process of the job on this host, now (a forced stop). */
export function killJob(identity: string): void {
  for (const pid of jobProcesses(identity)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

export interface SweepResult {
  killed: number;          // processes of the job that were still running
  stillRunning: number[];  // ones that did not go within the bound (a process stuck in the kernel)
  removed: string[];       // Open MPI files removed
}

const GONE_BOUND_MS = 10_000;

/** After mpirun/srun exited: kills what is left of the job here, waits until it is gone, then removes what an mpirun
 * that could not end in order left (its session directory and shared memory; mpirun only, srun leaves none here). */
export async function sweepJob(identity: string, mpirun: { pid: number; startedMs: number } | undefined): Promise<SweepResult> {
  const left = jobProcesses(identity);
  killJob(identity);
  const end = Date.now() + GONE_BOUND_MS;
  let running = left;
  // Files are removed only once no process of the job can write them again.
  while (running.length > 0 && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 10));
    running = jobProcesses(identity);
  }
  const removed = mpirun === undefined ? [] : removeOpenMpiFiles(mpirun.pid, mpirun.startedMs);
  return { killed: left.length, stillRunning: running, removed };
}
