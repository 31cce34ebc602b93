// Who started a cluster, as every one of its processes carries it in the environment (TRTLLM_LAUNCHED_BY): the
// launcher's host, pid and start time. Shared by both sides: ranks watch the launcher by it (worker/lifeline.ts) and
// the launcher finds what is left of its job by it (launcher/cluster/job-sweep.ts). The start time is what tells
// the launcher from a later process that reused its pid.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

export const LAUNCHER_ENV = 'TRTLLM_LAUNCHED_BY';

/** Set (to 1) when mpirun's stdin is the launcher's lifeline pipe, which mpirun forwards to rank 0 (worker/lifeline.ts). */
export const LIFELINE_STDIN_ENV = 'TRTLLM_LIFELINE_STDIN';

export interface LauncherIdentity {
  host: string;
  pid: number;
  startTime: string;   // /proc/<pid>/stat's starttime: clock ticks after boot
}

/** A process's start time on this host, or undefined when it does not exist (or is not visible from here). */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** This process's identity, as the launcher puts it in its ranks' environment. */
export function ownIdentity(): string {
  return formatLauncherIdentity({ host: hostname(), pid: process.pid, startTime: processStartTime(process.pid) ?? '?' });
}

export function formatLauncherIdentity(id: LauncherIdentity): string {
  return `${id.host}:${id.pid}:${id.startTime}`;
}

export function parseLauncherIdentity(text: string | undefined): LauncherIdentity | undefined {
  const m = /^(.+):(\d+):(\d+)$/.exec(text ?? '');
  return m ? { host: m[1]!, pid: Number(m[2]), startTime: m[3]! } : undefined;
}

/** Whether the process `id` names still runs on this host (the same process: same pid and start time). */
export function launcherAlive(id: LauncherIdentity): boolean {
  return processStartTime(id.pid) === id.startTime;
}
