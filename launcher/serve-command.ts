// `trtllm-launch [serve] --model <dir> --world-size 1 --http-port 8000 --metrics-port 8002`: serve one model in
// this process until SIGINT/SIGTERM. Every option has a TRTLLM_* environment fallback. World size 1 only, until
// leader mode over MPI lands.
import { type Command, InvalidArgumentError, Option } from 'commander';

import type { SchedulerPolicy } from '../worker/binding/addon-types.js';
import { TrtllmError } from '../worker/binding/errors.js';
import { LOG_LEVELS, type LogLevel } from '../worker/log.js';
import { serveUntilSignal } from '../worker/serve.js';
import { defaultModelDir } from './defaults.js';
import { parseChoiceOption, parseIntOption, parsePortOption } from './parse-options.js';

interface ServeCliOptions {
  model: string;
  worldSize: number;
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

/** Rejects what this build cannot do yet, naming the option and the value. */
export function checkWorldSize(worldSize: number): void {
  if (worldSize !== 1) {
    throw new InvalidArgumentError(
      `--world-size ${worldSize}: only 1 is supported for now; leader mode over MPI (tensor/pipeline parallel ranks) is not implemented yet`,
    );
  }
}

function option(flags: string, description: string, env: string): Option {
  return new Option(flags, `${description} (env ${env})`).env(env);
}

/** Adds the serve options to a command (the `serve` subcommand and the bare program share them). */
export function addServeOptions(command: Command): Command {
  return command
    .addOption(option('--model <dir>', 'Hugging Face checkpoint directory', 'TRTLLM_MODEL').default(defaultModelDir()))
    .addOption(option('--world-size <n>', 'ranks (tp × pp); only 1 for now', 'TRTLLM_WORLD_SIZE').argParser(parseIntOption('--world-size', 1)).default(1))
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

export async function runServe(options: ServeCliOptions): Promise<number> {
  checkWorldSize(options.worldSize);
  try {
    return await serveUntilSignal({
      model: options.model, host: options.host, httpPort: options.httpPort, metricsPort: options.metricsPort,
      apiKey: options.apiKey, authHealth: options.authHealth, authMetrics: options.authMetrics,
      maxBodyBytes: options.maxBodyBytes, servedModelName: options.servedModelName, threads: options.threads,
      maxBatchSize: options.maxBatchSize, maxQueueSize: options.maxQueueSize, maxNumTokens: options.maxNumTokens,
      maxSeqLen: options.maxSeqLen, maxTokensInPagedKvCache: options.maxTokensInPagedKvCache,
      tokensPerBlock: options.tokensPerBlock, schedulerPolicy: options.schedulerPolicy,
      drainTimeoutMs: options.drainTimeout * 1000, logLevel: options.logLevel,
    });
  } catch (error) {
    if (error instanceof TrtllmError || (error as NodeJS.ErrnoException)?.code === 'EADDRINUSE') {
      process.stderr.write(`trtllm-launch serve: ${(error as Error).message}\n`);
      return 2;
    }
    throw error;
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

export function registerServe(program: Command): void {
  const serve = addServeOptions(program.command('serve', { isDefault: true }).description('serve a model over HTTP (KServe v2 + OpenAI) with Prometheus metrics'));
  serve.action(serveAction(serve));
}
