// `trtllm-launch [serve] --model <dir> --world-size N --http-port 8000 --metrics-port 8002`: world size 1 serves
// in this process; more ranks run under mpirun as `trtllm-launch rank`, supervised by this process (cluster/).
// Every option has a TRTLLM_* environment fallback.
import { type Command, InvalidArgumentError, Option } from 'commander';

import type { SchedulerPolicy } from '../worker/binding/addon-types.js';
import { TrtllmError } from '../worker/binding/errors.js';
import { LOG_LEVELS, type LogLevel } from '../worker/log.js';
import { loadAddon } from '../worker/binding/load-addon.js';
import { initRank } from '../worker/rank.js';
import { serveUntilSignal } from '../worker/serve.js';
import { launchCluster } from './cluster/launch.js';
import { resolveParallel } from './cluster/parallel-plan.js';
import { defaultModelDir } from './defaults.js';
import { parseChoiceOption, parseIntOption, parsePortOption } from './parse-options.js';

type LauncherKind = 'auto' | 'mpirun' | 'none';

interface ServeCliOptions {
  model: string;
  worldSize?: number;
  tp?: number;
  pp?: number;
  launcher: LauncherKind;
  oversubscribe: boolean;
  hostfile?: string;
  hosts?: string;
  startupTimeout: number;
  logDir?: string;
  dryRun: boolean;
  host: string;
  httpPort: number;
  metricsPort: number;
  apiKey?: string;
  authHealth: boolean;
  authMetrics: boolean;
  logLevel: LogLevel;
  servedModelName?: string;
  threads?: number;
  maxBatchSize?: number;
  maxQueueSize?: number;
  maxNumTokens?: number;
  maxSeqLen?: number;
  maxTokensInPagedKvCache?: number;
  tokensPerBlock?: number;
  schedulerPolicy?: SchedulerPolicy;
  maxBodyBytes: number;
  drainTimeout: number;
}

function option(flags: string, description: string, env: string): Option {
  return new Option(flags, `${description} (env ${env})`).env(env);
}

/** Adds the serve options to a command (the `serve` subcommand and the bare program share them). */
export function addServeOptions(command: Command): Command {
  return command
    .addOption(option('--model <dir>', 'Hugging Face checkpoint directory', 'TRTLLM_MODEL').default(defaultModelDir()))
    .addOption(option('--world-size <n>', 'ranks = tp × pp (default 1; alone it means tp = world size)', 'TRTLLM_WORLD_SIZE').argParser(parseIntOption('--world-size', 1)))
    .addOption(option('--tp <n>', 'tensor-parallel ranks', 'TRTLLM_TP').argParser(parseIntOption('--tp', 1)))
    .addOption(option('--pp <n>', 'pipeline-parallel stages', 'TRTLLM_PP').argParser(parseIntOption('--pp', 1)))
    .addOption(option('--launcher <kind>', 'auto | mpirun | none (auto: mpirun when world size > 1)', 'TRTLLM_LAUNCHER').argParser(parseChoiceOption('--launcher', ['auto', 'mpirun', 'none'] as const)).default('auto'))
    .addOption(option('--oversubscribe', 'allow more ranks than cores (CPU clusters on one machine)', 'TRTLLM_OVERSUBSCRIBE').default(false))
    .addOption(option('--hostfile <file>', 'mpirun hostfile for multi-node clusters', 'TRTLLM_HOSTFILE'))
    .addOption(option('--hosts <list>', 'comma-separated hosts (host:slots) for mpirun', 'TRTLLM_HOSTS'))
    .addOption(option('--startup-timeout <seconds>', 'give up when the leader is not ready by then', 'TRTLLM_STARTUP_TIMEOUT').argParser(parseIntOption('--startup-timeout', 1)).default(300))
    .addOption(option('--log-dir <dir>', 'also write each rank\'s output to <dir>/rank-N.log', 'TRTLLM_LOG_DIR'))
    .addOption(option('--dry-run', 'print the mpirun command and each rank\'s role, then exit', 'TRTLLM_DRY_RUN').default(false))
    .addOption(option('--host <addr>', 'address to listen on', 'TRTLLM_HOST').default('0.0.0.0'))
    .addOption(option('--http-port <port>', 'KServe v2 + OpenAI HTTP port', 'TRTLLM_HTTP_PORT').argParser(parsePortOption('--http-port')).default(8000))
    .addOption(option('--metrics-port <port>', 'Prometheus metrics port', 'TRTLLM_METRICS_PORT').argParser(parsePortOption('--metrics-port')).default(8002))
    .addOption(option('--api-key <key>', 'require "Authorization: Bearer <key>" on the API', 'TRTLLM_API_KEY'))
    .addOption(option('--auth-health', 'health endpoints need the API key too', 'TRTLLM_AUTH_HEALTH').default(false))
    .addOption(option('--auth-metrics', '/metrics needs the API key too', 'TRTLLM_AUTH_METRICS').default(false))
    .addOption(option('--log-level <level>', LOG_LEVELS.join(' | '), 'TRTLLM_LOG_LEVEL').argParser(parseChoiceOption('--log-level', LOG_LEVELS)).default('info'))
    .addOption(option('--served-model-name <name>', 'OpenAI model id (default: the checkpoint directory name)', 'TRTLLM_SERVED_MODEL_NAME'))
    .addOption(option('--threads <n>', 'compute threads (default: all cores)', 'TRTLLM_THREADS').argParser(parseIntOption('--threads', 1)))
    .addOption(option('--max-batch-size <n>', 'requests per iteration (default 64)', 'TRTLLM_MAX_BATCH_SIZE').argParser(parseIntOption('--max-batch-size', 1)))
    .addOption(option('--max-queue-size <n>', 'queued requests before 503 (default: unbounded)', 'TRTLLM_MAX_QUEUE_SIZE').argParser(parseIntOption('--max-queue-size', 0)))
    .addOption(option('--max-num-tokens <n>', 'tokens per iteration (default 8192)', 'TRTLLM_MAX_NUM_TOKENS').argParser(parseIntOption('--max-num-tokens', 1)))
    .addOption(option('--max-seq-len <n>', 'prompt + output tokens (default: the model\'s)', 'TRTLLM_MAX_SEQ_LEN').argParser(parseIntOption('--max-seq-len', 1)))
    .addOption(option('--max-tokens-in-paged-kv-cache <n>', 'KV cache capacity in tokens', 'TRTLLM_MAX_TOKENS_IN_PAGED_KV_CACHE').argParser(parseIntOption('--max-tokens-in-paged-kv-cache', 1)))
    .addOption(option('--tokens-per-block <n>', 'paged KV block size (default 64)', 'TRTLLM_TOKENS_PER_BLOCK').argParser(parseIntOption('--tokens-per-block', 1)))
    .addOption(option('--scheduler-policy <policy>', 'max_utilization | guaranteed_no_evict', 'TRTLLM_SCHEDULER_POLICY').argParser(parseChoiceOption('--scheduler-policy', ['max_utilization', 'guaranteed_no_evict'] as const)))
    .addOption(option('--max-body-bytes <n>', 'largest request body accepted', 'TRTLLM_MAX_BODY_BYTES').argParser(parseIntOption('--max-body-bytes', 1)).default(8 * 1024 * 1024))
    .addOption(option('--drain-timeout <seconds>', 'on SIGINT/SIGTERM, how long in-flight requests may finish', 'TRTLLM_DRAIN_TIMEOUT').argParser(parseIntOption('--drain-timeout', 0)).default(30));
}

function serveOptions(options: ServeCliOptions, parallel: { tp: number; pp: number }) {
  return {
    model: options.model, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort,
    apiKey: options.apiKey, authHealth: options.authHealth, authMetrics: options.authMetrics,
    maxBodyBytes: options.maxBodyBytes, servedModelName: options.servedModelName, threads: options.threads,
    maxBatchSize: options.maxBatchSize, maxQueueSize: options.maxQueueSize, maxNumTokens: options.maxNumTokens,
    maxSeqLen: options.maxSeqLen, maxTokensInPagedKvCache: options.maxTokensInPagedKvCache,
    tokensPerBlock: options.tokensPerBlock, schedulerPolicy: options.schedulerPolicy,
    drainTimeoutMs: options.drainTimeout * 1000, logLevel: options.logLevel, tp: parallel.tp, pp: parallel.pp,
  };
}

/** The serve options a rank needs, as arguments (the API key travels in the environment, not on `ps`). */
function rankArguments(o: ServeCliOptions): string[] {
  const args = ['--model', o.model, '--host', o.host, '--http-port', String(o.httpPort), '--metrics-port', String(o.metricsPort),
    '--log-level', o.logLevel, '--max-body-bytes', String(o.maxBodyBytes), '--drain-timeout', String(o.drainTimeout)];
  const optional: [string, unknown][] = [
    ['--served-model-name', o.servedModelName], ['--threads', o.threads], ['--max-batch-size', o.maxBatchSize],
    ['--max-queue-size', o.maxQueueSize], ['--max-num-tokens', o.maxNumTokens], ['--max-seq-len', o.maxSeqLen],
    ['--max-tokens-in-paged-kv-cache', o.maxTokensInPagedKvCache], ['--tokens-per-block', o.tokensPerBlock],
    ['--scheduler-policy', o.schedulerPolicy],
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

export async function runServe(options: ServeCliOptions): Promise<number> {
  const parallel = resolveParallel(options);
  const launcher = options.launcher === 'auto' ? (parallel.worldSize > 1 ? 'mpirun' : 'none') : options.launcher;
  if (launcher === 'none' && parallel.worldSize > 1) {
    throw new InvalidArgumentError(`--launcher none runs one rank in this process; --world-size ${parallel.worldSize} needs --launcher mpirun (or auto)`);
  }
  try {
    if (launcher === 'mpirun') {
      if (options.apiKey) process.env.TRTLLM_API_KEY = options.apiKey;
      return await launchCluster({
        parallel, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort,
        oversubscribe: options.oversubscribe, hostfile: options.hostfile, hosts: options.hosts,
        startupTimeoutSeconds: options.startupTimeout, drainTimeoutSeconds: options.drainTimeout, logDir: options.logDir,
        dryRun: options.dryRun, rankOptions: rankArguments(options),
      });
    }
    if (options.dryRun) {
      process.stdout.write(`one rank in this process (no MPI): ${options.model} on ${options.host}:${options.httpPort}\n`);
      return 0;
    }
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
      process.stdout.write(`leader pid ${process.pid}\n`);
      return await serveUntilSignal(serveOptions(options, parallel));
    }
    // Followers stop when the leader releases them after its drain; a signal from mpirun must not cut that short.
    process.on('SIGINT', () => {});
    process.on('SIGTERM', () => {});
    await loadAddon().runFollower(options.model, { ...parallel, ...(options.threads === undefined ? {} : { numThreads: options.threads }) });
    return 0;
  } catch (error) {
    return reportError(error, 'rank');
  }
}

function serveAction(command: Command) {
  return async () => {
    const options = command.opts<ServeCliOptions>();
    try {
      process.exitCode = await runServe(options);
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
  const serve = addServeOptions(program.command('serve', { isDefault: true }).description('serve a model over HTTP (KServe v2 + OpenAI) with Prometheus metrics'));
  serve.action(serveAction(serve));
}
