// The multi-model plan the launcher hands every process of an orchestrator job (environment variable
// TRTLLM_MULTI_MODEL_PLAN, JSON): the frontend's options, and per model its serve options, grid and — without
// spawning — the job ranks that run it. Spawned groups inherit the variable through mpirun (-x), so the plan needs
// no file on a shared disk.
import type { ServeOptions } from '../options/serve-options.js';
import type { RouterKind } from './replica-set.js';

export const PLAN_ENV = 'TRTLLM_MULTI_MODEL_PLAN';

export interface GroupPlan {
  name: string;            // the served model name (unique)
  serve: ServeOptions;     // the model's serve options (checkpoint, executor settings, tp, pp)
  tp: number;
  pp: number;
  ranks: number[];         // no-spawn: the job ranks of this group (participant ids), leader first; spawn: []
  deviceIds: number[];     // the model's devices (rank i uses the i-th), or empty (CPU backend; devicesByHost)
  devicesByHost?: boolean; // --dp across hosts, ranks started up front: each rank's GPU is its local rank on its host
  replica?: number;        // --dp: this group is replica `replica` of the model `name` (groups of one model share it)
  router?: RouterKind;     // --multi-model with a model file's parallel.dp: its replicas' router (else plan.dp's)
}

export interface MultiModelPlan {
  spawn: boolean;          // true: the orchestrator spawns the groups; false: every rank started up front
  failFast: boolean;       // one group's death stops the whole cluster
  frontend: ServeOptions;  // host, ports, auth, drain timeout, log level (model fields unused)
  groups: GroupPlan[];
  dp?: {                   // --dp: every group is a replica of one model
    router: RouterKind;     // least-load | kv | round-robin (replica-set.ts)
    isolateFailures: boolean;  // a dead replica is dropped; without it, it stops the cluster (failFast is set)
  };
}

export function readPlan(env: NodeJS.ProcessEnv = process.env): MultiModelPlan {
  const text = env[PLAN_ENV];
  if (!text) throw new Error(`${PLAN_ENV} is not set: orchestrator processes are started by trtllm-launch --multi-model`);
  const plan = JSON.parse(text) as MultiModelPlan;
  if (!Array.isArray(plan.groups) || plan.groups.length === 0) throw new Error(`${PLAN_ENV} has no groups`);
  return plan;
}

/** No-spawn: which group a job rank belongs to (0: the orchestrator, g + 1: group g). */
export function colorOf(plan: MultiModelPlan, jobRank: number): number {
  if (jobRank === 0) return 0;
  const g = plan.groups.findIndex((group) => group.ranks.includes(jobRank));
  if (g < 0) throw new Error(`job rank ${jobRank} belongs to no model of the plan (ranks: ${plan.groups.map((p) => `${p.name} ${p.ranks.join(',')}`).join('; ')})`);
  return g + 1;
}
