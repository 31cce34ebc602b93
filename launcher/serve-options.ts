// The serve options: one definition shared by `serve`, the hidden `rank` command and `config print`, each with a
// TRTLLM_* environment fallback. Values are parsed here; a configuration file fills in what flags and env leave
// unset (config/).
import { type Command, Option } from 'commander';

import type { SchedulerPolicy } from '../worker/binding/addon-types.js';
import { LOG_LEVELS, type LogLevel } from '../worker/log.js';
import type { LauncherKind } from './cluster/mpirun-command.js';
import { defaultModelDir } from '../worker/common/package-root.js';
import { parseBoolOption, parseChoiceOption, parseFractionOption, parseIntOption, parsePortOption } from './parse-options.js';

export type { LauncherKind };


export interface ServeCliOptions {
  model: string;
  worldSize?: number;
  tp?: number;
  pp?: number;
  launcher: LauncherKind;
  oversubscribe: boolean;
  hostfile?: string;
  hosts?: string;
  srunArgs?: string;
  startupTimeout: number;
  logDir?: string;
  dryRun: boolean;
  device: 'auto' | 'cpu' | 'cuda';
  gpuDeviceIds?: string;
  loadFormat: 'auto' | 'dummy';
  kvCacheFreeGpuMemFraction?: number;
  grpcPort: number;
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
  enableChunkedContext?: boolean;
  enableKvCacheReuse?: boolean;
  maxBeamWidth?: number;
  maxBodyBytes: number;
  drainTimeout: number;
}

/** Where the configuration file comes from; not a serve option itself (ranks get the resolved values as flags). */
export interface ConfigSourceOptions {
  config?: string;
  modelRepo?: string;
}

function option(flags: string, description: string, env: string): Option {
  return new Option(flags, `${description} (env ${env})`).env(env);
}

// A switch that a file may have turned on must be able to turn it off again, and TRTLLM_X=false must mean false:
// commander's plain boolean flags read any env value as true, so these take an optional true/false.
function toggle(flags: string, description: string, env: string): Option {
  const name = flags.split(' ')[0]!;
  return option(`${flags} [bool]`, `${description}; "${name} false" turns it off`, env).argParser(parseBoolOption(name)).preset('true');
}

/** Adds the serve options to a command (the `serve` subcommand, the bare program, `rank` and `config print`). */
export function addServeOptions(command: Command): Command {
  return command
    .addOption(option('--model <dir>', 'Hugging Face checkpoint directory', 'TRTLLM_MODEL').default(defaultModelDir()))
    .addOption(option('--world-size <n>', 'ranks = tp × pp (default 1; alone it means tp = world size)', 'TRTLLM_WORLD_SIZE').argParser(parseIntOption('--world-size', 1)))
    .addOption(option('--tp <n>', 'tensor-parallel ranks', 'TRTLLM_TP').argParser(parseIntOption('--tp', 1)))
    .addOption(option('--pp <n>', 'pipeline-parallel stages', 'TRTLLM_PP').argParser(parseIntOption('--pp', 1)))
    .addOption(option('--launcher <kind>', 'auto | mpirun | srun | none (auto: srun inside a Slurm allocation, else mpirun when world size > 1)', 'TRTLLM_LAUNCHER').argParser(parseChoiceOption('--launcher', ['auto', 'mpirun', 'srun', 'none'] as const)).default('auto'))
    .addOption(option('--oversubscribe', 'allow more ranks than cores (CPU clusters on one machine)', 'TRTLLM_OVERSUBSCRIBE').default(false))
    .addOption(option('--hostfile <file>', 'mpirun hostfile for multi-node clusters', 'TRTLLM_HOSTFILE'))
    .addOption(option('--hosts <list>', 'comma-separated hosts (host:slots) for mpirun', 'TRTLLM_HOSTS'))
    .addOption(option('--srun-args <args>', 'extra srun arguments for the rank step under Slurm, e.g. "--container-image=img --container-mounts=/data:/data"', 'TRTLLM_SRUN_ARGS'))
    .addOption(option('--startup-timeout <seconds>', 'give up when the leader is not ready by then', 'TRTLLM_STARTUP_TIMEOUT').argParser(parseIntOption('--startup-timeout', 1)).default(300))
    .addOption(option('--log-dir <dir>', 'also write each rank\'s output to <dir>/rank-N.log', 'TRTLLM_LOG_DIR'))
    .addOption(option('--dry-run', 'print the mpirun command and each rank\'s role, then exit', 'TRTLLM_DRY_RUN').default(false))
    .addOption(option('--device <kind>', 'auto | cpu | cuda (auto: cuda when the addon has the CUDA backend and a GPU is visible)', 'TRTLLM_DEVICE').argParser(parseChoiceOption('--device', ['auto', 'cpu', 'cuda'] as const)).default('auto'))
    .addOption(option('--gpu-device-ids <ids>', 'GPU of each rank on a host, by local rank: "0,1" (default: local rank)', 'TRTLLM_GPU_DEVICE_IDS'))
    .addOption(option('--load-format <format>', 'auto | dummy (random weights of config.json\'s shapes, for benchmarks)', 'TRTLLM_LOAD_FORMAT').argParser(parseChoiceOption('--load-format', ['auto', 'dummy'] as const)).default('auto'))
    .addOption(option('--kv-cache-free-gpu-mem-fraction <x>', 'GPU: share of the free memory after loading the KV cache takes (default 0.9)', 'TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION').argParser(parseFractionOption('--kv-cache-free-gpu-mem-fraction')))
    .addOption(option('--grpc-port <port>', 'KServe v2 gRPC port (Triton\'s GRPCInferenceService)', 'TRTLLM_GRPC_PORT').argParser(parsePortOption('--grpc-port')).default(8001))
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
    .addOption(toggle('--enable-chunked-context', 'split prompts longer than an iteration\'s room into chunks (default off)', 'TRTLLM_ENABLE_CHUNKED_CONTEXT'))
    .addOption(toggle('--enable-kv-cache-reuse', 'reuse cached KV blocks of shared prompt prefixes (default off)', 'TRTLLM_ENABLE_KV_CACHE_REUSE'))
    .addOption(option('--max-beam-width <n>', 'largest beam width a request may ask for (default 1)', 'TRTLLM_MAX_BEAM_WIDTH').argParser(parseIntOption('--max-beam-width', 1)))
    .addOption(option('--max-body-bytes <n>', 'largest request body accepted', 'TRTLLM_MAX_BODY_BYTES').argParser(parseIntOption('--max-body-bytes', 1)).default(8 * 1024 * 1024))
    .addOption(option('--drain-timeout <seconds>', 'on SIGINT/SIGTERM, how long in-flight requests may finish', 'TRTLLM_DRAIN_TIMEOUT').argParser(parseIntOption('--drain-timeout', 0)).default(30));
}

/** Orchestrator mode (Triton's --multi-model): one orchestrator serving every model of --model-repo. */
export function addMultiModelOptions(command: Command): Command {
  return command
    .addOption(option('--multi-model', 'serve every model file of --model-repo, each on its own worker group (orchestrator mode)', 'TRTLLM_MULTI_MODEL').default(false))
    .addOption(new Option('--no-spawn', 'orchestrator mode without MPI_Comm_spawn: start every rank up front (Slurm); ranks from participant_ids'))
    .addOption(option('--fail-fast', 'orchestrator mode: one model\'s failure stops the whole cluster', 'TRTLLM_FAIL_FAST').default(false));
}

/** Where the configuration comes from: a YAML file, or a model repository holding one (see config/). */
export function addConfigSourceOptions(command: Command): Command {
  return command
    .addOption(option('--config <file>', 'YAML configuration file; flags and env override it', 'TRTLLM_CONFIG'))
    .addOption(option('--model-repo <dir>', 'directory of YAML model files; one file = --config <that file>', 'TRTLLM_MODEL_REPO'));
}
