// `trtllm-launch [serve] --model <dir> --world-size N --http-port 8000 --metrics-port 8002`: world size 1 serves
// in this process; more ranks run under mpirun as `trtllm-launch rank`, supervised by this process (cluster/).
// Every option has a TRTLLM_* environment fallback; --config / --model-repo add a YAML file under flags and env.
// The frontend and the supervisor are imported only on the path that needs them: every process of a cluster starts
// through this file, and their modules (execa, prom-client, tokenizers) cost 0.1-0.3 s each on a small machine.
import { hostname } from 'node:os';

import { type Command, InvalidArgumentError } from 'commander';

import { TrtllmError } from '../worker/common/errors.js';
import { loadAddon } from '../worker/binding/load-addon.js';
import { leaderPidLine } from '../worker/common/status-lines.js';
import { initRank } from '../worker/rank.js';
import { chooseLauncher } from './cluster/mpirun-command.js';
import { resolveParallel } from './cluster/parallel-plan.js';
import { ignoredSettings } from './config/effective-config.js';
import { resolveServeConfig } from './config/resolve-serve-config.js';
import { addConfigSourceOptions, addMultiModelOptions, addServeOptions, type ServeCliOptions } from './serve-options.js';

export function serveOptions(options: Readonly<ServeCliOptions>, parallel: { tp: number; pp: number }) {
  return {
    model: options.model, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort, grpcPort: options.grpcPort,
    apiKey: options.apiKey, authHealth: options.authHealth, authMetrics: options.authMetrics,
    maxBodyBytes: options.maxBodyBytes, servedModelName: options.servedModelName, threads: options.threads,
    maxBatchSize: options.maxBatchSize, maxQueueSize: options.maxQueueSize, maxNumTokens: options.maxNumTokens,
    maxSeqLen: options.maxSeqLen, maxTokensInPagedKvCache: options.maxTokensInPagedKvCache,
    tokensPerBlock: options.tokensPerBlock, schedulerPolicy: options.schedulerPolicy,
    enableChunkedContext: options.enableChunkedContext, enableKvCacheReuse: options.enableKvCacheReuse,
    maxBeamWidth: options.maxBeamWidth, drainTimeoutMs: options.drainTimeout * 1000, logLevel: options.logLevel, tp: parallel.tp, pp: parallel.pp,
    ...deviceOptions(options),
  };
}

/** The backend choice of this rank: --device, --load-format, the KV fraction, and its GPU from --gpu-device-ids. */
function deviceOptions(o: Readonly<ServeCliOptions>, localRank = 0) {
  const ids = o.gpuDeviceIds === undefined ? undefined : o.gpuDeviceIds.split(',').map((s) => Number(s.trim()));
  if (ids !== undefined && (ids.length === 0 || ids.some((n) => !Number.isInteger(n) || n < 0))) {
    throw new InvalidArgumentError(`--gpu-device-ids must be a comma-separated list of integers >= 0, got "${o.gpuDeviceIds}"`);
  }
  if (ids !== undefined && localRank >= ids.length) {
    throw new InvalidArgumentError(`--gpu-device-ids ${o.gpuDeviceIds} names ${ids.length} GPU(s) but this host runs local rank ${localRank}`);
  }
  return {
    device: o.device, loadFormat: o.loadFormat,
    ...(ids === undefined ? {} : { gpuDeviceId: ids[localRank] }),
    ...(o.kvCacheFreeGpuMemFraction === undefined ? {} : { kvCacheFreeGpuMemFraction: o.kvCacheFreeGpuMemFraction }),
  };
}

/** The serve options a rank needs, as arguments (the API key travels in the environment, not on `ps`). */
function rankArguments(o: Readonly<ServeCliOptions>): string[] {
  const args = ['--model', o.model, '--host', o.host, '--http-port', String(o.httpPort), '--metrics-port', String(o.metricsPort), '--grpc-port', String(o.grpcPort),
    '--log-level', o.logLevel, '--max-body-bytes', String(o.maxBodyBytes), '--drain-timeout', String(o.drainTimeout),
    '--device', o.device, '--load-format', o.loadFormat];
  const optional: [string, unknown][] = [
    ['--served-model-name', o.servedModelName], ['--threads', o.threads], ['--max-batch-size', o.maxBatchSize],
    ['--max-queue-size', o.maxQueueSize], ['--max-num-tokens', o.maxNumTokens], ['--max-seq-len', o.maxSeqLen],
    ['--max-tokens-in-paged-kv-cache', o.maxTokensInPagedKvCache], ['--tokens-per-block', o.tokensPerBlock],
    ['--scheduler-policy', o.schedulerPolicy], ['--enable-chunked-context', o.enableChunkedContext],
    ['--gpu-device-ids', o.gpuDeviceIds], ['--kv-cache-free-gpu-mem-fraction', o.kvCacheFreeGpuMemFraction],
    ['--enable-kv-cache-reuse', o.enableKvCacheReuse], ['--max-beam-width', o.maxBeamWidth],
  ];
  for (const [flag, value] of optional) if (value !== undefined) args.push(flag, String(value));
  if (o.authHealth) args.push('--auth-health');
  if (o.authMetrics) args.push('--auth-metrics');
  return args;
}

function reportError(error: unknown, what: string): number {
  if (error instanceof TrtllmError || (error as NodeJS.ErrnoException)?.code === 'EADDRINUSE') {
    process.stderr.write(`trtllm-launch ${what}: ${(error as Error).message}\n`);
    return 2;
  }
  throw error;
}

export async function runServe(options: Readonly<ServeCliOptions>): Promise<number> {
  const parallel = resolveParallel(options);
  const build = loadAddon().buildInfo();
  if (options.device === 'cuda' && !build.backends.includes('cuda')) {
    throw new InvalidArgumentError(`--device cuda: the CUDA backend is not built into this addon (${build.cuda}); use --device cpu or auto`);
  }
  if (options.gpuDeviceIds !== undefined && !build.backends.includes('cuda')) {
    process.stderr.write(`trtllm-launch: --gpu-device-ids ${options.gpuDeviceIds} is ignored on the CPU backend\n`);
  }
  deviceOptions(options);  // a malformed --gpu-device-ids fails here, before any rank starts
  const launcher = chooseLauncher(options.launcher, parallel.worldSize, process.env);
  if (launcher === 'none' && parallel.worldSize > 1) {
    throw new InvalidArgumentError(`--launcher none runs one rank in this process; --world-size ${parallel.worldSize} needs --launcher mpirun or srun (or auto)`);
  }
  try {
    if (launcher === 'mpirun' || launcher === 'srun') {
      if (options.apiKey) process.env.TRTLLM_API_KEY = options.apiKey;
      const { launchCluster } = await import('./cluster/launch.js');
      return await launchCluster({
        parallel, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort, grpcPort: options.grpcPort,
        oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts, srunArgs: options.srunArgs,
        startupTimeoutSeconds: options.startupTimeout, drainTimeoutSeconds: options.drainTimeout, logDir: options.logDir,
        dryRun: options.dryRun, rankOptions: rankArguments(options), launcher,
      });
    }
    if (options.dryRun) {
      process.stdout.write(`one rank in this process (no MPI): ${options.model} on ${options.host}:${options.httpPort}\n`);
      return 0;
    }
    const { serveUntilSignal } = await import('../worker/serve.js');
    return await serveUntilSignal(serveOptions(options, parallel));
  } catch (error) {
    return reportError(error, 'serve');
  }
}

/** One rank of a cluster (started by mpirun for the launcher): rank 0 serves, the others follow it. */
async function runRank(options: ServeCliOptions): Promise<number> {
  const parallel = { tp: options.tp ?? 1, pp: options.pp ?? 1 };
  try {
    const info = initRank();
    if (info.worldRank === 0) {
      process.stdout.write(`${leaderPidLine(process.pid, hostname())}\n`);
      const { serveUntilSignal } = await import('../worker/serve.js');
      return await serveUntilSignal({ ...serveOptions(options, parallel), ...deviceOptions(options, info.localRank) });
    }
    // Followers stop when the leader releases them after its drain; a signal from mpirun must not cut that short.
    process.on('SIGINT', () => {});
    process.on('SIGTERM', () => {});
    const { kvCacheFreeGpuMemFraction: _, ...device } = deviceOptions(options, info.localRank);
    await loadAddon().runFollower(options.model, {
      ...parallel, ...device, ...(options.threads === undefined ? {} : { numThreads: options.threads }),
      ...(options.maxNumTokens === undefined ? {} : { maxNumTokens: options.maxNumTokens }),
      ...(options.maxBatchSize === undefined ? {} : { maxBatchSize: options.maxBatchSize }),
    });
    return 0;
  } catch (error) {
    return reportError(error, 'rank');
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
      const config = await resolveServeConfig(command);
      for (const s of ignoredSettings(config)) {
        process.stderr.write(`trtllm-launch: ${s.key} = ${JSON.stringify(s.value)} (${s.origin}) ${s.ignored}\n`);
      }
      process.exitCode = await runServe(config.options);
    } catch (error) {
      if (error instanceof InvalidArgumentError) command.error(`error: ${error.message}`, { exitCode: 2 });
      throw error;
    }
  };
}

function rankAction(command: Command) {
  return async () => {
    process.exitCode = await runRank(command.opts<ServeCliOptions>());
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
    const { runOrchestrated } = await import('../worker/orchestrator/roles.js');
    try {
      process.exitCode = await runOrchestrated(orchestrated.opts());
    } catch (error) {
      process.exitCode = reportError(error, 'orchestrated');
    }
  });
  const serve = addMultiModelOptions(addConfigSourceOptions(addServeOptions(program.command('serve', { isDefault: true }).description('serve a model over HTTP (KServe v2 + OpenAI) with Prometheus metrics'))));
  serve.action(serveAction(serve));
}
