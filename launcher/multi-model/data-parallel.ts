// `trtllm-launch --model <dir> --dp N`: N replicas of one model behind one endpoint. Built on orchestrator mode: one
// orchestrator process owns the ports and spawns N worker groups of the same model (tp × pp ranks each); the model is
// one catalog entry whose executor routes each request to one replica (worker/orchestrator/replica-set.ts). With
// --no-spawn every replica's ranks are started up front by mpirun or srun instead (replica r: job ranks
// 1 + r·tp·pp ..), which is how --dp runs inside a Slurm allocation. This file checks what --dp cannot be combined
// with, plans the groups (pure: planDataParallel) and launches the job.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';

import { InvalidArgumentError } from 'commander';

import type { BuildInfo } from '../../worker/binding/addon-types.js';
import { loadAddon } from '../../worker/binding/load-addon.js';
import type { MultiModelPlan } from '../../worker/orchestrator/plan.js';
import { PLAN_ENV } from '../../worker/orchestrator/plan.js';
import { parseGpuDeviceIds } from '../../worker/options/device-ids.js';
import { loraProblem } from '../../worker/options/lora-options.js';
import { kvCacheEventsProblem } from '../../worker/options/serve-option-table.js';
import { serveOptions } from '../../worker/options/serve-options-from-cli.js';
import { chooseLauncher } from '../cluster/mpirun-command.js';
import { resolveExperts, resolveParallel } from '../cluster/parallel-plan.js';
import { checkModelBeforeLaunch } from '../model-preflight.js';
import { dpNodeLayout } from './dp-node-layout.js';
import type { ServeCliOptions } from '../serve-options.js';

/** The KV event buffer each replica keeps when --router kv is given without --kv-cache-event-buffer-max-size. */
export const KV_ROUTER_EVENT_BUFFER = 16_384;

export interface DataParallelInput {
  options: Readonly<ServeCliOptions>;   // dp > 1
  spawn: boolean;                        // false: --no-spawn
  failFast: boolean;                     // --fail-fast (the default for --dp anyway)
  cpu: boolean;
  cores: number;
  /** The ranks may run on several hosts (--hostfile / --hosts, srun): without --gpu-device-ids each rank takes the
   * GPU of its local rank on its host (one fewer on the orchestrator's host) rather than a job-wide number. */
  acrossHosts?: boolean;
}

const fail = (message: string): never => { throw new InvalidArgumentError(message); };

/** The plan of a --dp job (pure): one group per replica, the same serve options, each replica on its own devices. */
export function planDataParallel(input: DataParallelInput): { plan: MultiModelPlan; notes: string[] } {
  const o = input.options;
  const dp = o.dp ?? 1;
  const notes: string[] = [];
  // --world-size, when given, counts the replicas' ranks (dp × tp × pp); the orchestrator is extra.
  if (o.worldSize !== undefined && o.worldSize % dp !== 0) fail(`--world-size ${o.worldSize} is not a multiple of --dp ${dp} (world size = dp × tp × pp)`);
  const parallel = resolveParallel({ worldSize: o.worldSize === undefined ? undefined : o.worldSize / dp, tp: o.tp, pp: o.pp });
  const { tp, pp } = parallel;
  const experts = resolveExperts(tp, o);
  let options: ServeCliOptions = { ...o, ep: experts.ep > 1 ? experts.ep : undefined };
  if (o.router === 'kv') {
    if (o.enableKvCacheReuse !== true) fail('--router kv needs --enable-kv-cache-reuse: it routes by what each replica\'s prefix cache holds, which is off');
    if ((o.kvCacheEventBufferMaxSize ?? 0) === 0) {
      options = { ...options, kvCacheEventBufferMaxSize: KV_ROUTER_EVENT_BUFFER };
      notes.push(`--router kv: each replica records KV cache events (--kv-cache-event-buffer-max-size ${KV_ROUTER_EVENT_BUFFER}, set for it)`);
    }
  }
  const events = kvCacheEventsProblem(options);
  if (events) fail(events);
  const lora = loraProblem(options);
  if (lora) fail(lora);
  const ranks = tp * pp;
  // Devices: --gpu-device-ids lists every replica's in order (replica r takes the r-th run of tp × pp ids); without
  // it, the CUDA backend gives replica r devices r·tp·pp .. (r+1)·tp·pp − 1 (one host), or with the ranks started
  // up front across hosts, each rank the GPU of its local rank there (worker/orchestrator/group-rank.ts).
  const byHost = !input.cpu && o.gpuDeviceIds === undefined && !input.spawn && input.acrossHosts === true;
  let ids: number[] = [];
  if (o.gpuDeviceIds !== undefined) {
    const parsed = parseGpuDeviceIds(o.gpuDeviceIds);
    if (!parsed.ok) return fail(parsed.message);
    ids = parsed.value;
    if (ids.length < dp * ranks) fail(`--gpu-device-ids "${o.gpuDeviceIds}" has ${ids.length} id(s); --dp ${dp} x --tp ${tp} x --pp ${pp} needs ${dp * ranks}, one per rank`);
    if (new Set(ids).size !== ids.length) fail(`--gpu-device-ids "${o.gpuDeviceIds}" names a device twice: each replica needs its own devices`);
  } else if (!input.cpu && !byHost) {
    ids = Array.from({ length: dp * ranks }, (_, i) => i);
  }
  const processes = 1 + dp * ranks;
  if (input.cpu && processes > input.cores && !o.oversubscribe) {
    fail(`--dp ${dp} needs ${processes} processes (the orchestrator + ${dp} replica(s) of tp ${tp} x pp ${pp}) but this machine has ${input.cores} core(s): pass --oversubscribe to run more ranks than cores`);
  }
  const serve = serveOptions({ ...options, gpuDeviceIds: undefined }, { tp, pp });
  const name = o.servedModelName ?? basename(resolve(o.model));
  const { apiKey: _secret, ...frontend } = serveOptions({ ...options, gpuDeviceIds: undefined }, { tp: 1, pp: 1 });
  // No-spawn: replica r is job ranks 1 + r·tp·pp .. (r + 1)·tp·pp, its leader first (rank 0: the orchestrator).
  const groups = Array.from({ length: dp }, (_, r) => ({
    name, serve, tp, pp, deviceIds: ids.slice(r * ranks, (r + 1) * ranks), replica: r, ...(byHost ? { devicesByHost: true } : {}),
    ranks: input.spawn ? [] : Array.from({ length: ranks }, (_, i) => 1 + r * ranks + i),
  }));
  // One rule for a dead replica: the cluster is a gang (it stops) unless --isolate-failures.
  const isolate = o.isolateFailures && !input.failFast;
  return {
    plan: { spawn: input.spawn, failFast: !isolate, frontend, groups, dp: { router: o.router, isolateFailures: isolate } },
    notes,
  };
}

export async function runDataParallel(options: Readonly<ServeCliOptions>, flags: { spawn: boolean; failFast: boolean }, build: BuildInfo): Promise<number> {
  const dp = options.dp ?? 1;
  const launcher = chooseLauncher(options.launcher, 2, process.env);
  if (launcher === 'none') throw new InvalidArgumentError(`--dp ${dp} runs an orchestrator and ${dp} worker groups under MPI: --launcher none cannot start them (use mpirun or auto)`);
  if (launcher === 'srun' && flags.spawn) {
    fail(`--dp ${dp} under srun (Slurm${process.env.SLURM_JOB_ID ? ': --launcher srun, chosen inside a Slurm allocation' : ''}): Slurm's MPI plugins cannot spawn the replicas' worker groups; add --no-spawn to start every replica's ranks with srun up front`);
  }
  if (options.srunArgs !== undefined && launcher !== 'srun') fail(`--srun-args applies to --dp ${dp} only under srun (--launcher srun); this job runs under ${launcher}`);
  if (options.isolateFailures && flags.failFast) fail('--isolate-failures and --fail-fast contradict each other: give one');
  const gpu = build.backends.includes('cuda') && options.device !== 'cpu';
  if (options.device === 'cuda' && !gpu) fail(`--device cuda: the CUDA backend is not built into this addon (${build.cuda}); use --device cpu or auto`);
  // Under srun the allocation places the ranks (on its nodes, with its CPUs), and with --hostfile / --hosts mpirun
  // places them on those hosts' slots: not this machine's cores.
  const elsewhere = launcher === 'srun' || options.hostfile !== undefined || options.hosts !== undefined;
  const cores = elsewhere ? Number.POSITIVE_INFINITY : availableParallelism();
  const { plan, notes } = planDataParallel({ options, spawn: flags.spawn, failFast: flags.failFast, cpu: !gpu, cores, acrossHosts: elsewhere });
  for (const note of notes) process.stderr.write(`trtllm-launch: ${note}\n`);
  const g0 = plan.groups[0]!;
  const note = checkModelBeforeLaunch({
    model: options.model, tp: g0.tp, pp: g0.pp, ep: g0.serve.ep ?? 1, ppLayers: g0.serve.ppLayers, ranksElsewhere: options.hosts !== undefined || options.hostfile !== undefined,
  }, loadAddon());
  if (note !== undefined) process.stderr.write(`trtllm-launch: ${note}\n`);
  if (options.apiKey) process.env.TRTLLM_API_KEY = options.apiKey;
  const ranks = g0.tp * g0.pp;
  const roles = [
    `rank 0: orchestrator; HTTP ${options.host}:${options.httpPort}, metrics :${options.metricsPort}; ${plan.spawn ? 'spawns' : 'links to'} ${dp} replica(s) of ${g0.name}; router ${plan.dp!.router}; ${plan.dp!.isolateFailures ? '--isolate-failures: a dead replica is dropped' : 'a dead replica stops the cluster'}`,
    ...plan.groups.map((g) => `${g.name} replica ${g.replica}: tp ${g.tp} x pp ${g.pp} (${plan.spawn ? 'spawned' : `started by ${launcher}`}), ${ranks === 1 ? `rank ${1 + g.replica!}` : `ranks ${1 + g.replica! * ranks}-${(g.replica! + 1) * ranks}`} of the job${g.deviceIds.length ? `, devices ${g.deviceIds.join(',')}` : g.devicesByHost ? ', each rank the GPU of its local rank on its host' : ''}`),
  ];
  const banner = (host: string) => [
    `serving ${g0.name} on http://${host}:${options.httpPort} with ${dp} replicas (router ${plan.dp!.router}), metrics on http://${host}:${options.metricsPort}/metrics`,
    `  curl -X POST ${host}:${options.httpPort}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20}'`,
    '  Ctrl-C drains and stops every replica',
  ];
  const { launchCluster } = await import('../cluster/launch.js');
  const np = plan.spawn ? 1 : 1 + dp * ranks;
  const srunArgs = launcher === 'srun' ? await spreadOverNodes(dp, ranks, options.srunArgs) : options.srunArgs;
  return launchCluster({
    parallel: { worldSize: np, tp: 1, pp: 1 }, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort, grpcPort: options.grpcPort,
    oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts, startupTimeoutSeconds: options.startupTimeout,
    drainTimeoutSeconds: options.drainTimeout, logDir: options.logDir, dryRun: options.dryRun, rankOptions: [], launcher, srunArgs,
    orchestrated: { np, env: { [PLAN_ENV]: JSON.stringify(plan) }, roles, banner, spawned: plan.spawn ? dp * ranks : 0 },
  });
}

/** Under srun in an allocation of several nodes: the orchestrator and the replicas laid out by dpNodeLayout (through
 * SLURM_HOSTFILE, which srun reads from this process's environment); one node: srun's own layout. */
async function spreadOverNodes(dp: number, ranks: number, srunArgs: string | undefined): Promise<string | undefined> {
  const list = process.env.SLURM_JOB_NODELIST ?? process.env.SLURM_NODELIST;
  if (Number(process.env.SLURM_JOB_NUM_NODES ?? process.env.SLURM_NNODES ?? '1') <= 1 || list === undefined) return srunArgs;
  const { execa } = await import('execa');
  const shown = await execa('scontrol', ['show', 'hostnames', list], { reject: false });
  if (shown.exitCode !== 0) fail(`--dp ${dp} over the nodes ${list}: scontrol show hostnames failed (${shown.stderr.trim()})`);
  const layout = dpNodeLayout(shown.stdout.split('\n').filter((n) => n !== ''), dp, ranks);
  if ('error' in layout) return fail(layout.error);
  const file = join(mkdtempSync(join(tmpdir(), 'trtllm-dp-')), 'hostfile');
  writeFileSync(file, `${layout.hosts.join('\n')}\n`);
  process.env.SLURM_HOSTFILE = file;
  return [srunArgs, '--distribution=arbitrary'].filter((a) => a !== undefined && a !== '').join(' ');
}
