// One process serving one model: load the tokenizer and the executor, warm up, open the HTTP, gRPC and metrics ports,
// and on SIGINT/SIGTERM drain — refuse new requests with a 503 naming the drain while the ports stay open, let
// in-flight requests finish (or cut them at the deadline, with an error), close the ports once the last answers
// are written, shut the executor down and exit 0.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { basename, resolve } from 'node:path';

import { DRAIN_SIGNAL } from './common/drain-signal.js';
import { TrtllmError } from './common/errors.js';
import { readyLine } from './common/status-lines.js';
import { Executor } from './executor/executor.js';
import { modelPrecision } from './executor/precision.js';
import { loadChatTemplate } from './frontend/chat-template.js';
import { DrainState } from './frontend/drain-state.js';
import { beginPortsDrain, closePorts } from './frontend/frontend-drain.js';
import { createFrontendServer, createMetricsServer } from './frontend/frontend.js';
import { LogitsBudget, logitsLimits } from './frontend/logits-budget.js';
import { ServingMetrics } from './frontend/metrics.js';
import { singleModelCatalog } from './frontend/model-catalog.js';
import { MODEL_NAMES } from './frontend/model-repository.js';
import { OpenResponses } from './frontend/open-responses.js';
import { buildServingContext, type ServingContext } from './frontend/serving-context.js';
import { testHooksEnabled } from './frontend/test-hooks.js';
import { createLogger, type Logger } from './log.js';
import { executorOptions } from './options/executor-options.js';
import { loraEnabled, loraProblem, servedAdapters } from './options/lora-options.js';
import { kvCacheEventsProblem } from './options/serve-option-table.js';
import type { ServeOptions } from './options/serve-options.js';
import { loadTokenizer } from './tokenizer.js';
import { TokenizerPool } from './tokenizer-pool.js';

export interface RunningServer {
  context: ServingContext;
  httpPort: number;
  metricsPort: number;
  grpcPort: number | undefined;
  /** Drains and stops everything; resolves when the executor has shut down. `cause` (e.g. "SIGTERM") is named in
   * the 503s and errors clients get meanwhile. */
  close(cause?: string): Promise<void>;
}

const STATS_POLL_MS = 500;  // drains iteration stats often enough that the native ring buffer never overflows

/** Opens `server` on host:port; a port that cannot be bound fails naming the option that set it (`option`), the
 * port and the host — under a launcher that is the root cause the user reads. */
export function listen(server: Server, port: number, host: string, option: string): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const failed = (error: NodeJS.ErrnoException) => {
      reject(new TrtllmError(`${option} ${port} on ${host} cannot be bound (${error.code ?? error.message}); another server may hold it: stop it or pick another port`, 'invalid_argument'));
    };
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolvePort((server.address() as AddressInfo).port);
    });
  });
}

export async function startServer(options: ServeOptions, log: Logger = createLogger(options.logLevel)): Promise<RunningServer> {
  const modelDir = resolve(options.model);
  const events = kvCacheEventsProblem(options);
  if (events) throw new TrtllmError(events, 'invalid_argument');
  const servedModelName = options.servedModelName ?? basename(modelDir);
  const lora = loraProblem({ ...options, servedModelName });
  if (lora) throw new TrtllmError(lora, 'invalid_argument');
  const adapters = servedAdapters(options.loraModules);
  const tokenizer = loadTokenizer(modelDir);
  const chatTemplate = loadChatTemplate(modelDir);
  const started = performance.now();
  // The tokenizer threads load while the executor does.
  const tokenizerPool = new TokenizerPool(modelDir);
  const executor = await Executor.load(modelDir, executorOptions(options)).catch(async (error: unknown) => {
    await tokenizerPool.close();
    throw error;
  });
  await tokenizerPool.ready().catch(async (error: unknown) => {
    await Promise.all([executor.shutdown(), tokenizerPool.close()]);
    throw error;
  });
  const config = executor.modelConfig;
  // Which precision runs: the checkpoint's own quantization, --quantization fp8, or 16-bit weights.
  const precision = modelPrecision(config, options.quantization);
  const ep = options.ep ?? 1;
  const experts = config.numExperts > 0
    ? `; ${config.numExperts} experts, top ${config.expertsPerToken}${ep > 1 ? `, ep ${ep} x moe_tp ${(options.tp ?? 1) / ep}` : ''}` : '';
  log.info(`loaded ${config.architectureName} from ${modelDir} in ${((performance.now() - started) / 1000).toFixed(2)} s; weights ${precision.weights}; KV cache ${precision.kvCache}${experts}`);
  if (options.draftModel !== undefined) {
    log.info(`speculative decoding: draft model ${resolve(options.draftModel)} guesses ${options.numDraftTokens ?? 4} token(s) a step (a request's num_draft_tokens overrides it)`);
  } else if (options.medusaHeads !== undefined) {
    log.info(`speculative decoding: Medusa heads ${resolve(options.medusaHeads)} propose up to ${options.numDraftTokens ?? 4} candidate(s) a step, ` +
      `checked as one tree (${options.medusaChoices === undefined ? 'default choices' : `--medusa-choices ${options.medusaChoices}`}; a request's num_draft_tokens overrides the count)`);
  } else if (options.eagleHeads !== undefined) {
    log.info(`speculative decoding: EAGLE heads ${resolve(options.eagleHeads)} guess ${options.numDraftTokens ?? 4} token(s) a step from the model's hidden states, ` +
      `${options.eagleChoices === undefined ? 'one after the other' : `as a tree (--eagle-choices ${options.eagleChoices})`} (a request's num_draft_tokens overrides the count)`);
  } else if ((options.speculativeNgram ?? 0) > 0) {
    log.info(`speculative decoding: prompt lookup guesses up to ${options.speculativeNgram} token(s) a step`);
  }
  if (config.tpAllReduce) log.info(`tensor-parallel all-reduce: ${config.tpAllReduce}`);
  for (const a of adapters) log.info(`LoRA adapter ${a.name}: lora_task_id ${a.taskId}, from ${a.dir}`);
  if (adapters.length === 0 && loraEnabled(options)) log.info('LoRA: requests may bring adapters (lora_task_id with lora_weights + lora_config)');
  // The executor's own count: a backend may keep fewer in flight than asked (the CUDA one: at most 2).
  const pipelined = (config.ppMicroBatches ?? 1) > 1;
  if ((options.pp ?? 1) > 1) {
    log.info(pipelined ? `pipeline parallelism: ${config.ppMicroBatches} micro-batches in flight`
      : 'pipeline parallelism: the stages run one after the other');
  }
  if (pipelined && (options.draftModel !== undefined || options.medusaHeads !== undefined || options.eagleHeads !== undefined || (options.speculativeNgram ?? 0) > 0)) {
    log.warn('speculative decoding is off while pp micro-batches are pipelined; pass --pp-micro-batches 1 to speculate');
  }

  let ready = false;
  const drain = new DrainState();
  const metrics = new ServingMetrics(executor, [...MODEL_NAMES, servedModelName, ...adapters.map((a) => a.name)], { precision });
  executor.onIterationStats(metrics.onIterationStats);
  const context = buildServingContext({
    executor, tokenizer, tokenizerPool, metrics, chatTemplate, modelDir,
    servedModelName, adapters,
    maxBatchSize: options.maxBatchSize ?? 64,
    logitsBudget: new LogitsBudget(logitsLimits(options)),
    // Not ready while draining, nor while the gang is stalled: a rank stopped making progress, so nothing would be
    // answered.
    isReady: () => ready && !drain.draining && !executor.clusterStalled(),
    drainRefusal: () => drain.refusal(),
  });
  const endId = context.defaults.endId;

  // Warm-up: one real request through the executor before we say ready, so the first user request does not pay
  // for first-touch costs and a broken engine fails here rather than on traffic.
  const warmId = tokenizer.bosTokenId ?? (endId >= 0 ? endId : 0);
  await executor.generate({ inputTokenIds: [warmId], maxTokens: 1 });
  executor.iterationStats();

  const catalog = singleModelCatalog(context);
  const http = createFrontendServer(catalog, {
    apiKey: options.apiKey, authHealth: options.authHealth, authMetrics: options.authMetrics,
    maxBodyBytes: options.maxBodyBytes, allowAnyContentType: options.allowAnyContentType,
    onError: (error) => log.error(`request failed: ${(error as Error)?.stack ?? String(error)}`),
    onClientGone: (message) => {
      log.debug(`client gone: ${message}`);
      metrics.clientGone();
    },
    ...(testHooksEnabled() ? { testHooks: executor } : {}),
  });
  const responses = new OpenResponses(http);
  const metricsServer = createMetricsServer(metrics, { apiKey: options.apiKey, authMetrics: options.authMetrics });
  const httpPort = await listen(http, options.httpPort, options.host, '--http-port');
  const metricsPort = await listen(metricsServer, options.metricsPort, options.host, '--metrics-port');
  // grpc-js is loaded only where a gRPC port is asked for.
  const grpc = options.grpcPort === undefined ? undefined : await (await import('./frontend/grpc/server.js')).startGrpcServer(
    { catalog },
    { host: options.host, port: options.grpcPort, maxMessageBytes: options.maxBodyBytes, apiKey: options.apiKey,
      authHealth: options.authHealth, onError: (error) => log.error(`gRPC request failed: ${(error as Error)?.stack ?? String(error)}`) },
  );
  const poll = setInterval(() => executor.iterationStats(), STATS_POLL_MS);
  poll.unref();
  ready = true;

  const ports = { http, responses, grpc, metrics: metricsServer };
  let closing: Promise<void> | undefined;
  const close = (cause = 'shutdown requested') => {
    closing ??= (async () => {
      // Readiness turns 503 at once (load balancers stop sending) and new requests get a 503 naming the drain; the
      // ports stay open, so nobody mistakes the drain for a crash (a refused connection).
      drain.begin(cause);
      beginPortsDrain(ports, drain.refusal()!);
      // Requests admitted before the drain may still be tokenizing: they reach the executor before it drains.
      const deadline = Date.now() + options.drainTimeoutMs;
      await tokenizerPool.settled(deadline);
      await executor.drain(deadline,
        (left) => log.warn(`drain deadline reached: cancelling ${left} request(s)`), drain.deadlineMessage(options.drainTimeoutMs));
      // Every request has its final response; the ports close once the answers carrying them are written.
      await closePorts(ports);
      clearInterval(poll);
      await executor.shutdown();
      await tokenizerPool.close();
    })();
    return closing;
  };
  return { context, httpPort, metricsPort, grpcPort: grpc?.port, close };
}

/** `trtllm-launch serve`: starts, prints how to query it, and runs until SIGINT/SIGTERM; returns the exit code. */
export async function serveUntilSignal(options: ServeOptions): Promise<number> {
  const log = createLogger(options.logLevel);
  const server = await startServer(options, log);
  const host = options.host === '0.0.0.0' || options.host === '::' ? 'localhost' : options.host;
  const auth = options.apiKey ? ` -H "Authorization: Bearer $TRTLLM_API_KEY"` : '';
  const lines = [
    `Started HTTPService at ${options.host}:${server.httpPort}`,
    ...(server.grpcPort === undefined ? [] : [`Started GRPCInferenceService at ${options.host}:${server.grpcPort}`]),
    `Started Metrics Service at ${options.host}:${server.metricsPort}`,
    readyLine(server.context.servedModelName, MODEL_NAMES),
    `  curl -X POST ${host}:${server.httpPort}/v2/models/ensemble/generate${auth} -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
    `  OpenAI base URL: http://${host}:${server.httpPort}/v1 (model "${server.context.servedModelName}"${server.context.adapters.map((a) => `, LoRA adapter "${a.name}"`).join('')})`,
    `  metrics: curl ${host}:${server.metricsPort}/metrics`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  await new Promise<void>((done) => {
    const stop = (signal: string) => {
      log.info(`${signal}: draining (up to ${options.drainTimeoutMs} ms), then stopping`);
      server.close(signal).then(done, (error: unknown) => {
        log.error(`shutdown failed: ${String(error)}`);
        done();
      });
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once(DRAIN_SIGNAL, () => stop(`${DRAIN_SIGNAL} (the launcher's drain request)`));
  });
  log.info('stopped');
  return 0;
}
