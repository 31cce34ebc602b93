// `trtllm-launch --multi-model --model-repo <dir>`: every model file of the repository, merged under the flags and
// env like a --config file, planned (plan-groups.ts) and started as one orchestrator job under mpirun or srun.
import { availableParallelism } from 'node:os';

import { type Command, InvalidArgumentError } from 'commander';

import { loadAddon } from '../../worker/binding/load-addon.js';
import { PLAN_ENV } from '../../worker/orchestrator/plan.js';
import { launchCluster } from '../cluster/launch.js';
import { chooseLauncher } from '../cluster/mpirun-command.js';
import { resolveExperts } from '../cluster/parallel-plan.js';
import { effectiveConfig } from '../config/effective-config.js';
import { modelRepoFiles } from '../config/model-repo.js';
import { isTritonRepo } from '../config/triton-repo.js';
import { cliValues, readConfigFile } from '../config/resolve-serve-config.js';
import { serveOptions } from '../../worker/options/serve-options-from-cli.js';
import type { ConfigSourceOptions, MultiModelOptions, ServeCliOptions } from '../serve-options.js';
import { type ModelFile, planMultiModel } from './plan-groups.js';

export async function runMultiModel(command: Command): Promise<number> {
  const { modelRepo, config } = command.opts<ConfigSourceOptions>();
  const flags = command.opts<MultiModelOptions & ServeCliOptions>();
  if (config !== undefined) throw new InvalidArgumentError(`--multi-model serves every model file of --model-repo; --config ${config} names a single model: drop it`);
  if (modelRepo === undefined) throw new InvalidArgumentError('--multi-model needs --model-repo <dir>: a directory with one YAML file per model (model, name, parallel.tp, ...)');
  const cli = cliValues(command);
  const models: ModelFile[] = [];
  if (isTritonRepo(modelRepo) && modelRepoFiles(modelRepo, '--model-repo', false).length === 0) {
    throw new InvalidArgumentError(`--model-repo ${modelRepo} is a Triton model repository (tensorrt_llm/config.pbtxt), which serves one model: drop --multi-model, or give a directory with one YAML file per model`);
  }
  for (const path of modelRepoFiles(modelRepo)) {
    const file = await readConfigFile(path, `--model-repo ${modelRepo}`);
    models.push({ path, options: effectiveConfig(cli, file).options, values: file.values });
  }
  const spawnNp = 1;
  const launcher = chooseLauncher(flags.launcher, 2, process.env);
  if (launcher === 'none') throw new InvalidArgumentError('--multi-model runs the orchestrator and its worker groups under MPI: --launcher none cannot start them (use mpirun, srun or auto)');
  if (launcher === 'srun' && flags.spawn) {
    throw new InvalidArgumentError('--multi-model under srun: Slurm\'s MPI plugins do not support spawning worker groups; add --no-spawn to start every rank with srun up front');
  }
  const build = loadAddon().buildInfo();
  const gpu = build.backends.includes('cuda') && flags.device !== 'cpu';
  if (flags.device === 'cuda' && !gpu) throw new InvalidArgumentError(`--device cuda: the CUDA backend is not built into this addon (${build.cuda}); use --device cpu or auto`);
  // Device ids are per model here (files, or Triton's "0,1;2,3"): each group rank gets its own from the plan.
  // A model's --moe-tp reaches its ranks as the ep it implies (as in one-model serving).
  const perModel = (o: Readonly<ServeCliOptions>, parallel: { tp: number; pp: number }) => {
    const { ep } = resolveExperts(parallel.tp, o);
    return serveOptions({ ...o, gpuDeviceIds: undefined, ep: ep > 1 ? ep : undefined }, parallel);
  };
  const { apiKey: _secret, ...frontend } = perModel(flags, { tp: 1, pp: 1 });
  const plan = planMultiModel({
    models, spawn: flags.spawn, failFast: flags.failFast, worldSize: flags.worldSize, oversubscribe: flags.oversubscribe,
    cpu: !gpu, gpuDeviceIds: flags.gpuDeviceIds, frontend, serveOptions: perModel,
    // With --hostfile / --hosts mpirun places the ranks on those hosts' slots, not on this machine's cores.
    cores: flags.hostfile !== undefined || flags.hosts !== undefined ? Number.POSITIVE_INFINITY : availableParallelism(),
  });
  if (flags.apiKey) process.env.TRTLLM_API_KEY = flags.apiKey;
  const total = plan.groups.reduce((n, g) => n + g.tp * g.pp, 0);
  const roles = [
    `rank 0: orchestrator; HTTP ${flags.host}:${flags.httpPort}, metrics :${flags.metricsPort}; ${plan.spawn ? 'spawns' : 'links to'} ${plan.groups.length} worker group(s)${plan.failFast ? '; --fail-fast' : ''}`,
    ...plan.groups.map((g) => `${g.name}${g.replica === undefined ? '' : ` replica ${g.replica} (router ${g.router})`}: tp ${g.tp} x pp ${g.pp} from ${g.serve.model}${plan.spawn ? ' (spawned)' : `, job ranks ${g.ranks.join(',')}`}${g.deviceIds.length ? `, devices ${g.deviceIds.join(',')}` : ''}`),
  ];
  const banner = (host: string) => [
    `serving ${plan.groups.length} model(s) on http://${host}:${flags.httpPort} (orchestrator mode), metrics on http://${host}:${flags.metricsPort}/metrics`,
    ...plan.groups.map((g) => `  curl -X POST ${host}:${flags.httpPort}/v2/models/${g.name}/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20}'`),
    `  model states: curl -X POST ${host}:${flags.httpPort}/v2/repository/index`,
    '  Ctrl-C drains and stops every model',
  ];
  return launchCluster({
    parallel: { worldSize: plan.spawn ? spawnNp : 1 + total, tp: 1, pp: 1 }, host: flags.host, httpPort: flags.httpPort, metricsPort: flags.metricsPort,
    oversubscribe: flags.oversubscribe, hostfile: flags.hostfile, hosts: flags.hosts, startupTimeoutSeconds: flags.startupTimeout,
    drainTimeoutSeconds: flags.drainTimeout, logDir: flags.logDir, dryRun: flags.dryRun, rankOptions: [], launcher,
    orchestrated: { np: plan.spawn ? spawnNp : 1 + total, env: { [PLAN_ENV]: JSON.stringify(plan) }, roles, banner, spawned: plan.spawn ? total : 0 },
  });
}
