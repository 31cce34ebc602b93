// `trtllm-launch [serve] --model <dir> --world-size N --http-port 8000 --metrics-port 8002`: world size 1 serves
// in this process; more ranks run under mpirun as `trtllm-launch rank` (their roles: worker/roles/), supervised by
// this process (cluster/).
// Every option has a TRTLLM_* environment fallback; --config / --model-repo add a YAML file under flags and env.
// The frontend and the supervisor are imported only on the path that needs them: every process of a cluster starts
// through this file, and their modules (execa, prom-client, tokenizers) cost 0.1-0.3 s each on a small machine.
import { type Command, InvalidArgumentError } from 'commander';

import type { BuildInfo } from '../worker/binding/addon-types.js';
import { loadAddon } from '../worker/binding/load-addon.js';
import { surviveDrainSignal } from '../worker/common/drain-signal.js';
import { TrtllmError } from '../worker/common/errors.js';
import { rankFailureLine } from '../worker/common/status-lines.js';
import { parseGpuDeviceIds } from '../worker/options/device-ids.js';
import { loraModuleDirsProblem, loraProblem, servedAdapters } from '../worker/options/lora-options.js';
import { kvCacheEventsProblem } from '../worker/options/serve-option-table.js';
import { serveOptions } from '../worker/options/serve-options-from-cli.js';
import { chooseLauncher } from './cluster/mpirun-command.js';
import { resolveExperts, resolveParallel } from './cluster/parallel-plan.js';
import { ignoredSettings } from './config/effective-config.js';
import { checkModelBeforeLaunch } from './model-preflight.js';
import { resolveServeConfig } from './config/resolve-serve-config.js';
import { rankArguments } from './option-argv.js';
import { addConfigSourceOptions, addMultiModelOptions, addServeOptions, type ServeCliOptions } from './serve-options.js';

function reportError(error: unknown, what: string): number {
  if (error instanceof TrtllmError || (error as NodeJS.ErrnoException)?.code === 'EADDRINUSE') {
    process.stderr.write(`${rankFailureLine(what, (error as Error).message)}\n`);
    return 2;
  }
  throw error;
}

function expertCount(model: string): number | undefined {
  try {
    return loadAddon().readModelConfig(model).numExperts;
  } catch {
    return undefined;  // (on other hosts only: the ranks report it)
  }
}

/** `build`: the addon's; a setting without effect on its backend (--gpu-device-ids on the CPU) was said already
 * (serveAction, from the effective configuration). */
export async function runServe(given: Readonly<ServeCliOptions>, build: BuildInfo): Promise<number> {
  const parallel = resolveParallel(given);
  // Ranks need only ep (moe_tp = tp / ep): --moe-tp alone becomes the ep it implies.
  const experts = resolveExperts(parallel.tp, given);
  const options: Readonly<ServeCliOptions> = { ...given, ep: experts.ep > 1 ? experts.ep : undefined };
  const events = kvCacheEventsProblem(options);
  if (events) throw new InvalidArgumentError(events);
  const lora = loraProblem(options);
  if (lora) throw new InvalidArgumentError(lora);
  if (options.device === 'cuda' && !build.backends.includes('cuda')) {
    throw new InvalidArgumentError(`--device cuda: the CUDA backend is not built into this addon (${build.cuda}); use --device cpu or auto`);
  }
  // A malformed --gpu-device-ids fails here, before any rank starts.
  const ids = options.gpuDeviceIds === undefined ? undefined : parseGpuDeviceIds(options.gpuDeviceIds);
  if (ids && !ids.ok) throw new InvalidArgumentError(ids.message);
  const launcher = chooseLauncher(options.launcher, parallel.worldSize, process.env);
  if (launcher === 'none' && parallel.worldSize > 1) {
    throw new InvalidArgumentError(`--launcher none runs one rank in this process; --world-size ${parallel.worldSize} needs --launcher mpirun or srun (or auto)`);
  }
  // Before mpirun (or the in-process server) starts: a bad --model or a grid it cannot split fails here, exit 2.
  // Not under srun: there the launcher may run on a login node while the model lives only on the compute nodes
  // (slurm/README.md), and a job's ranks report such a failure as the job's root cause.
  if (launcher !== 'srun') {
    const note = checkModelBeforeLaunch({
      model: options.model, tp: parallel.tp, pp: parallel.pp, ep: experts.ep, ppLayers: options.ppLayers, ranksElsewhere: options.hosts !== undefined || options.hostfile !== undefined,
    }, loadAddon());
    if (note !== undefined) process.stderr.write(`trtllm-launch: ${note}\n`);
    // The adapters' directories, where the ranks will look for them (on this host).
    const adapters = options.hosts === undefined && options.hostfile === undefined ? loraModuleDirsProblem(options.loraModules) : undefined;
    if (adapters) throw new InvalidArgumentError(adapters);
  }
  // For --dry-run's rank lines: which experts each rank holds (the checkpoint passed the checks above).
  const numExperts = experts.ep > 1 && launcher !== 'srun' ? expertCount(options.model) : undefined;
  try {
    if (launcher === 'mpirun' || launcher === 'srun') {
      if (options.apiKey) process.env.TRTLLM_API_KEY = options.apiKey;
      const { launchCluster } = await import('./cluster/launch.js');
      return await launchCluster({
        parallel, experts: { ...experts, numExperts }, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort, grpcPort: options.grpcPort,
        oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts, srunArgs: options.srunArgs,
        startupTimeoutSeconds: options.startupTimeout, drainTimeoutSeconds: options.drainTimeout, logDir: options.logDir,
        dryRun: options.dryRun, rankOptions: rankArguments(options), launcher,
      });
    }
    if (options.dryRun) {
      const adapters = servedAdapters(options.loraModules).map((a) => `${a.name} (lora_task_id ${a.taskId}, ${a.dir})`);
      process.stdout.write(`one rank in this process (no MPI): ${options.model} on ${options.host}:${options.httpPort}${adapters.length ? `; LoRA adapters ${adapters.join(', ')}` : ''}\n`);
      return 0;
    }
    const { serveUntilSignal } = await import('../worker/serve.js');
    return await serveUntilSignal(serveOptions(options, parallel));
  } catch (error) {
    return reportError(error, 'serve');
  }
}

function serveAction(command: Command) {
  return async () => {
    try {
      if (command.opts<{ multiModel?: boolean }>().multiModel) {
        const { runMultiModel } = await import('./multi-model/multi-model-command.js');
        try {
          process.exitCode = await runMultiModel(command);
        } catch (error) {
          if (error instanceof InvalidArgumentError) throw error;
          process.exitCode = reportError(error, 'serve');
        }
        return;
      }
      const build = loadAddon().buildInfo();
      const config = await resolveServeConfig(command, build);
      for (const s of ignoredSettings(config)) {
        process.stderr.write(`trtllm-launch: ${s.key} = ${JSON.stringify(s.value)} (${s.origin}) ${s.ignored}\n`);
      }
      for (const note of config.file?.notes ?? []) process.stderr.write(`trtllm-launch: ${note}\n`);
      if ((config.options.dp ?? 1) > 1) {
        const { runDataParallel } = await import('./multi-model/data-parallel.js');
        const flags = command.opts<{ spawn: boolean; failFast: boolean }>();
        try {
          process.exitCode = await runDataParallel(config.options, { spawn: flags.spawn !== false, failFast: flags.failFast === true }, build);
        } catch (error) {
          if (error instanceof InvalidArgumentError) throw error;
          process.exitCode = reportError(error, 'serve');
        }
        return;
      }
      if (config.options.router !== 'least-load' || config.options.isolateFailures) {
        const flag = config.options.router !== 'least-load' ? `--router ${config.options.router}` : '--isolate-failures';
        throw new InvalidArgumentError(`${flag} applies to data-parallel replicas: add --dp <n> (n >= 2)`);
      }
      process.exitCode = await runServe(config.options, build);
    } catch (error) {
      if (error instanceof InvalidArgumentError) command.error(`error: ${error.message}`, { exitCode: 2 });
      throw error;
    }
  };
}

/** A rank (or the orchestrator) that failed ends its process now, whatever still holds it open — a port it did bind,
 * the executor's threads: its peers and the launcher learn of the failure from its exit alone. (Issue 22: rank 0 kept
 * its HTTP port after its metrics port failed to bind, and the job hung until --startup-timeout.) An error that is
 * not ours is thrown on, and an uncaught error ends the process too. */
function endRank(error: unknown, role: string): never {
  process.exit(reportError(error, role));
}

/** `rank`: one rank of a leader-mode cluster; the role itself is the worker's (worker/roles/leader-mode.ts). */
function rankAction(command: Command) {
  return async () => {
    surviveDrainSignal();
    const { runRank } = await import('../worker/roles/leader-mode.js');
    try {
      process.exitCode = await runRank(command.opts<ServeCliOptions>());
    } catch (error) {
      endRank(error, 'rank');
    }
  };
}

export function registerServe(program: Command): void {
  const rank = addServeOptions(program.command('rank', { hidden: true }).description('one rank of a cluster (started by the launcher under mpirun)'));
  rank.action(rankAction(rank));
  const orchestrated = program.command('orchestrated', { hidden: true })
    .description('one process of a --multi-model job: the orchestrator or a rank of a worker group (started under mpirun/srun)')
    .option('--group <index>', 'the worker group a spawned process belongs to', (v) => Number(v))
    .option('--orchestrator <host:pid>', 'the orchestrator that spawned this group');
  orchestrated.action(async () => {
    surviveDrainSignal();
    const { runOrchestrated } = await import('../worker/roles/orchestrated.js');
    try {
      process.exitCode = await runOrchestrated(orchestrated.opts());
    } catch (error) {
      endRank(error, 'orchestrated');
    }
  });
  const serve = addMultiModelOptions(addConfigSourceOptions(addServeOptions(program.command('serve', { isDefault: true }).description('serve a model over HTTP (KServe v2 + OpenAI) with Prometheus metrics'))));
  serve.action(serveAction(serve));
}
