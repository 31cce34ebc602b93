// Every process of an orchestrator job starts here (`trtllm-launch orchestrated`) and takes its role: the
// orchestrator, or a rank of one model's worker group — spawned by the orchestrator, or (no-spawn) started with it
// by mpirun/srun and sorted into groups by the plan's rank lists.
import { hostname } from 'node:os';

import { loadAddon } from '../binding/load-addon.js';
import { leaderExitLine, leaderPidLine } from '../common/status-lines.js';
import { tieToLauncher, watchLauncherStdin } from '../lifeline.js';
import { createLogger } from '../log.js';
import { runGroupRank } from '../orchestrator/group-rank.js';
import { runOrchestrator, spawnLinks } from '../orchestrator/orchestrator.js';
import { colorOf, readPlan } from '../orchestrator/plan.js';
import type { RankIdentity } from '../orchestrator/wire.js';

export interface OrchestratedArgs {
  group?: number;            // a spawned group's index (set by the orchestrator)
  orchestrator?: string;     // "host:pid" of the orchestrator that spawned this group
}

function parseIdentity(text: string): RankIdentity {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at), pid: Number(text.slice(at + 1)) };
}

/** The launcher drains the cluster by signalling this process: it looks for this line (as for a leader). The
 * orchestrator is the job's rank 0, the one mpirun gives the launcher's lifeline (worker/lifeline.ts). */
function announce(): void {
  watchLauncherStdin();
  process.stdout.write(`${leaderPidLine(process.pid, hostname())}\n`);
}

/** mpirun --enable-recovery exits 0 whatever its processes did: the launcher reads the orchestrator's own code. */
function reportExit(code: number): number {
  process.stdout.write(`${leaderExitLine(code)}\n`);
  return code;
}

export async function runOrchestrated(args: OrchestratedArgs): Promise<number> {
  tieToLauncher();  // the orchestrator and every group rank, spawned ones included: none outlives what started it
  const plan = readPlan();
  if (process.env.TRTLLM_API_KEY) plan.frontend.apiKey = process.env.TRTLLM_API_KEY;
  const addon = loadAddon();
  const info = addon.commInit(true, true);
  const log = createLogger(plan.frontend.logLevel);
  if (plan.spawn) {
    if (!info.spawned) {
      announce();
      return reportExit(await runOrchestrator(plan, await spawnLinks(plan, log), log));
    }
    const index = args.group ?? -1;
    const group = plan.groups[index];
    if (!group || args.orchestrator === undefined) throw new Error(`a spawned group needs --group (0..${plan.groups.length - 1}) and --orchestrator host:pid`);
    return runGroupRank(group, info.worldRank, undefined, parseIdentity(args.orchestrator), log);
  }
  // No spawning: everybody learns the orchestrator's identity (job rank 0), then splits into groups and links up.
  const job = addon.groupMembers();
  const color = colorOf(plan, info.jobRank);
  const groupInfo = addon.joinGroup(color);
  const links = await addon.linkGroups(color, plan.groups.length);
  if (color === 0) {
    announce();
    return reportExit(await runOrchestrator(plan, links, log));
  }
  return runGroupRank(plan.groups[color - 1]!, groupInfo.worldRank, links, job[0]!, log, info.localRank);
}
