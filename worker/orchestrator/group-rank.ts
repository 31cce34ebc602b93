// One rank of a worker group in orchestrator mode. Rank 0 leads (group-leader.ts); the others follow it exactly as
// in leader mode. Every rank watches the orchestrator: a group must not outlive it, whatever killed it.
import { hostname } from 'node:os';

import type { AddonLinks } from '../binding/addon-types.js';
import { loadAddon } from '../binding/load-addon.js';
import type { Logger } from '../log.js';
import { followerOptions } from '../options/executor-options.js';
import { processAlive } from './process-alive.js';
import { runGroupLeader } from './group-leader.js';
import type { GroupPlan } from './plan.js';
import type { RankIdentity } from './wire.js';

const WATCH_MS = 250;

/**
 * Ends this process at once when the orchestrator is gone, seen from its pid on the same host. On another host the
 * group's leader watches the orchestrator's heartbeats instead (group-leader.ts), and followers there end with the
 * launcher's mpirun/srun.
 */
export function watchOrchestrator(orchestrator: RankIdentity, log: Logger): void {
  if (orchestrator.host !== hostname()) return;
  const timer = setInterval(() => {
    if (processAlive(orchestrator.pid)) return;
    log.error(`the orchestrator (pid ${orchestrator.pid}) is gone: stopping`);
    process.kill(process.pid, 'SIGKILL');  // no MPI_Finalize: the peers it would wait for are gone too
  }, WATCH_MS);
  timer.unref();
}

/** devicesByHost: a rank's GPU among its host's, counted by its local rank there; the orchestrator (job rank 0,
 * so local rank 0 on its host) holds none (pure). */
export function gpuOnHost(localRank: number, orchestratorHere: boolean): number {
  return orchestratorHere ? localRank - 1 : localRank;
}

export async function runGroupRank(group: GroupPlan, rank: number, links: AddonLinks | undefined, orchestrator: RankIdentity, log: Logger,
  localRank?: number): Promise<number> {
  const addon = loadAddon();
  const ranks = addon.groupMembers();  // collective over the group: the orchestrator watches these processes
  watchOrchestrator(orchestrator, log);
  // The model's devices are its own (plan-groups.ts): rank i of the group runs on the i-th.
  const gpu = group.devicesByHost && localRank !== undefined ? gpuOnHost(localRank, orchestrator.host === hostname()) : group.deviceIds[rank];
  const serve = gpu === undefined ? group.serve : { ...group.serve, gpuDeviceId: gpu };
  if (rank !== 0) {
    // Followers stop when the leader releases them after its drain; a signal must not cut that short.
    process.on('SIGINT', () => {});
    process.on('SIGTERM', () => {});
    await addon.runFollower(serve.model, { ...followerOptions(serve), tp: group.tp, pp: group.pp });
    return 0;
  }
  process.on('SIGINT', () => {});  // the orchestrator drains its groups itself
  process.on('SIGTERM', () => {});
  return runGroupLeader({ ...group, serve }, links ?? addon.linkToParent(), ranks, orchestrator.host !== hostname(), log);
}
