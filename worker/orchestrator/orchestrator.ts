// The orchestrator (Triton's orchestrator mode): one process that owns the frontend and, per model of the
// repository, a worker group — spawned here with MPI_Comm_spawn, or started up front by mpirun/srun (no-spawn).
// It waits until every group is ready or failed, serves every model by name, drains the groups on SIGINT/SIGTERM
// (the ports stay open meanwhile, refusing new requests with a 503 naming the drain, as a one-model server does),
// and keeps serving the others when one group dies (unless fail-fast).
import { hostname } from 'node:os';
import { join } from 'node:path';

import { Registry, collectDefaultMetrics } from 'prom-client';

import type { AddonLinks } from '../binding/addon-types.js';
import { loadAddon } from '../binding/load-addon.js';
import { DRAIN_SIGNAL } from '../common/drain-signal.js';
import { packageRoot } from '../common/package-root.js';
import { rankFailureLine } from '../common/status-lines.js';
import { modelPrecision } from '../executor/precision.js';
import { loadChatTemplate } from '../frontend/chat-template.js';
import { DrainState } from '../frontend/drain-state.js';
import { beginPortsDrain, closePorts } from '../frontend/frontend-drain.js';
import { createFrontendServer, createMetricsServer, type MetricsEndpoint } from '../frontend/frontend.js';
import { LogitsBudget, logitsLimits } from '../frontend/logits-budget.js';
import { ServingMetrics } from '../frontend/metrics.js';
import { type CatalogModel, multiModelCatalog } from '../frontend/model-catalog.js';
import { MODEL_NAMES } from '../frontend/model-repository.js';
import { OpenResponses } from '../frontend/open-responses.js';
import { buildServingContext } from '../frontend/serving-context.js';
import type { Logger } from '../log.js';
import { servedAdapters } from '../options/lora-options.js';
import { listen } from '../serve.js';
import { loadTokenizer } from '../tokenizer.js';
import type { MultiModelPlan } from './plan.js';
import { HEARTBEAT_INTERVAL_MS } from './wire.js';
import { ReplicaSet } from './replica-set.js';
import { WorkerGroup } from './worker-group.js';

const CHECK_MS = 250;

/** The command line a spawned group runs: this program's hidden `orchestrated` command. */
function groupArgv(index: number): string[] {
  return [join(packageRoot(), 'bin', 'trtllm-launch.js'), 'orchestrated', '--group', String(index), '--orchestrator', `${hostname()}:${process.pid}`];
}

export async function spawnLinks(plan: MultiModelPlan, log: Logger): Promise<AddonLinks> {
  const specs = plan.groups.map((g, i) => ({ command: process.execPath, args: groupArgv(i), processes: g.tp * g.pp }));
  log.info(`spawning ${specs.length} worker group(s): ${plan.groups.map((g) => `${g.name} (${g.tp * g.pp} rank(s))`).join(', ')}`);
  return loadAddon().spawnGroups(specs);
}

export async function runOrchestrator(plan: MultiModelPlan, links: AddonLinks, log: Logger): Promise<number> {
  const opts = plan.frontend;
  let open = false;
  const drain = new DrainState();
  let exitCode = 0;
  let stopRequested: ((code: number) => void) | undefined;
  const stopped = new Promise<number>((resolve) => { stopRequested = resolve; });
  // Once the links are closed (MPI may be finalized right after), a late send — a client's cancel arriving while the
  // cluster stops — is dropped: an MPI call after MPI_Finalize aborts the process, and that abort would be reported
  // as the cluster's root cause in place of the real one (issue 22: --fail-fast named an MPI_Isend).
  let linksClosed = false;
  const groups = plan.groups.map((g, i) => new WorkerGroup(i, g, {
    send: (tag, bytes) => { if (!linksClosed) links.send(i, tag, bytes); },
    drop: () => links.disconnect(i, true),
    // A spawned group leaves its parent intercommunicator in MPI_Finalize: disconnect here too, or both wait.
    close: () => links.disconnect(i, !plan.spawn),
  }, log, (failed) => {
    if (plan.failFast && exitCode === 0) {
      // --dp: the replicas are a gang unless --isolate-failures (the launcher set failFast from it).
      const rule = plan.dp ? '--dp without --isolate-failures' : '--fail-fast';
      log.error(`${rule}: model ${failed.label} failed, stopping the whole cluster`);
      // The first cause, in the line the launcher puts first in its root cause: whatever goes wrong while the
      // cluster stops (an MPI abort, another group's death) is a consequence and must not stand in for it.
      process.stderr.write(`${rankFailureLine('orchestrated', `${rule}: model ${failed.label} failed: ${failed.reason}`)}\n`);
      exitCode = 1;
      stopRequested?.(1);
    }
  }));
  links.listen((batch) => {
    for (const [index, tag, bytes] of batch) groups[index]?.receive(tag, bytes);
  });
  const watch = setInterval(() => { for (const g of groups) g.check(); }, CHECK_MS);
  const heartbeat = setInterval(() => { for (const g of groups) g.heartbeat(); }, HEARTBEAT_INTERVAL_MS);

  await Promise.all(groups.map((g) => g.settled()));
  const failed = groups.filter((g) => g.status === 'failed');
  if (failed.length > 0 && plan.failFast) {
    for (const g of groups) g.killSurvivors();
    clearInterval(watch);
    clearInterval(heartbeat);
    linksClosed = true;
    links.close();
    return 1;
  }

  // One registry for all models; each model's executor gauges are labelled with its name.
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const catalogModels: CatalogModel[] = [];
  const allMetrics: ServingMetrics[] = [];
  const logitsBudget = new LogitsBudget(logitsLimits(opts));  // one for the server: every model's logits share it
  // A model is its group, or under --dp its replicas' groups (one catalog entry, a replica set as its executor).
  const models = new Map<string, WorkerGroup[]>();
  for (const g of groups) models.set(g.name, [...(models.get(g.name) ?? []), g]);
  const polled: (() => void)[] = [];  // each model's executor (its replica set, or its one group's) asked for stats
  for (const [i, members] of [...models.values()].entries()) {
    const g = members[0]!;
    // --dp, or a --multi-model file with parallel.dp: several groups under one name.
    const replicated = plan.dp !== undefined || members.length > 1;
    const anyLive = () => members.some((m) => m.status === 'ready');
    const reason = replicated
      ? () => (anyLive() ? undefined : `no replica is serving (${members.map((m) => `replica ${m.plan.replica}: ${m.reason ?? m.status}`).join('; ')})`)
      : () => g.reason ?? (g.status === 'ready' ? undefined : `its worker group is ${g.status}`);
    const adapters = servedAdapters(g.plan.serve.loraModules);
    if (!members.some((m) => m.executor)) {
      catalogModels.push({ name: g.name, ctx: undefined, reason, adapters });
      continue;
    }
    const set = replicated ? new ReplicaSet(g.name, members, g.plan.router ?? plan.dp?.router ?? 'least-load', registry) : undefined;
    const executor = set ?? g.executor!;
    polled.push(set ? () => { set.iterationStats(); } : () => { g.executor?.iterationStats(); });
    const names = [...(i === 0 ? [g.name, ...MODEL_NAMES] : [g.name]), ...adapters.map((a) => a.name)];
    const metrics = new ServingMetrics(executor, names, { registry, engineModel: g.name, precision: modelPrecision(executor.modelConfig, g.plan.serve.quantization) });
    executor.onIterationStats(metrics.onIterationStats);
    allMetrics.push(metrics);
    const ctx = buildServingContext({
      executor, tokenizer: loadTokenizer(g.plan.serve.model), modelDir: g.plan.serve.model, metrics,
      chatTemplate: loadChatTemplate(g.plan.serve.model), servedModelName: g.name, adapters, maxBatchSize: g.plan.serve.maxBatchSize ?? 64, logitsBudget,
      // --dp: ready once every replica came up (the orchestrator waited for all); after that while one serves.
      isReady: () => open && !drain.draining && (set ? set.anyLive() : g.status === 'ready'), unavailableReason: reason,
      drainRefusal: () => drain.refusal(),
    });
    catalogModels.push({ name: g.name, ctx, reason, adapters });
  }
  const endpoint: MetricsEndpoint = {
    registry,
    scrape: async () => {
      for (const m of allMetrics) m.refresh();
      return registry.metrics();
    },
  };
  const catalog = multiModelCatalog(catalogModels);
  const http = createFrontendServer(catalog, {
    apiKey: opts.apiKey, authHealth: opts.authHealth, authMetrics: opts.authMetrics, maxBodyBytes: opts.maxBodyBytes,
    allowAnyContentType: opts.allowAnyContentType,
    onError: (error) => log.error(`request failed: ${(error as Error)?.stack ?? String(error)}`),
    onClientGone: (message) => {
      log.debug(`client gone: ${message}`);
      allMetrics[0]?.clientGone();  // one family in the shared registry, whichever model's metrics count it
    },
  });
  const responses = new OpenResponses(http);
  const metricsServer = createMetricsServer(endpoint, { apiKey: opts.apiKey, authMetrics: opts.authMetrics });
  const metricsPort = await listen(metricsServer, opts.metricsPort, opts.host, '--metrics-port');
  // The gRPC port answers from the same catalog: every model by name, Triton's names on the first.
  const grpc = opts.grpcPort === undefined ? undefined : await (await import('../frontend/grpc/server.js')).startGrpcServer(
    { catalog },
    { host: opts.host, port: opts.grpcPort, maxMessageBytes: opts.maxBodyBytes, apiKey: opts.apiKey, authHealth: opts.authHealth,
      onError: (error) => log.error(`gRPC request failed: ${(error as Error)?.stack ?? String(error)}`) },
  );
  // The HTTP port opens last, and `open` follows it with no await between: the launcher takes /v2/health/live for
  // "ready", so a request that comes right after must not find the models still closed (503) while gRPC starts.
  const httpPort = await listen(http, opts.httpPort, opts.host, '--http-port');
  open = true;
  const poll = setInterval(() => { for (const ask of polled) ask(); }, 500);
  const shown = opts.host === '0.0.0.0' || opts.host === '::' ? 'localhost' : opts.host;
  process.stdout.write([
    `Started HTTPService at ${opts.host}:${httpPort}`,
    `Started Metrics Service at ${opts.host}:${metricsPort}`,
    ...(grpc === undefined ? [] : [`Started GRPCInferenceService at ${opts.host}:${grpc.port}`]),
    plan.dp
      ? `orchestrator ready: ${groups.filter((g) => g.status === 'ready').length} of ${groups.length} replica(s) of ${groups[0]!.name} serving`
      : `orchestrator ready: ${[...models.values()].filter((ms) => ms.some((m) => m.status === 'ready')).length} of ${models.size} model(s) serving`,
    ...groups.map((g) => `  ${g.label}: ${g.status === 'ready' ? `ready (tp ${g.plan.tp} x pp ${g.plan.pp})` : `NOT available: ${g.reason}`}`),
    `  curl -X POST ${shown}:${httpPort}/v2/models/${groups[0]!.name}/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20}'`,
    '',
  ].join('\n'));

  let cause = '--fail-fast: a model failed';
  const onSignal = (signal: string) => {
    log.info(`${signal}: draining every model (up to ${opts.drainTimeoutMs} ms), then stopping`);
    cause = signal;
    stopRequested?.(0);
  };
  process.once('SIGINT', () => onSignal('SIGINT'));
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once(DRAIN_SIGNAL, () => onSignal(`${DRAIN_SIGNAL} (the launcher's drain request)`));
  const code = await stopped;

  // New requests get a 503 naming the drain from here on; the ports stay open until the groups have drained and
  // the answers carrying their last responses are written.
  drain.begin(cause);
  const ports = { http, responses, grpc, metrics: metricsServer };
  beginPortsDrain(ports, drain.refusal()!);
  const contexts = catalogModels.flatMap((m) => (m.ctx ? [m.ctx] : []));
  if (code === 0) {
    // Requests admitted before the drain may still be tokenizing: they reach their group before it drains.
    await Promise.all(contexts.map((ctx) => ctx.tokenizerPool.settled(Date.now() + opts.drainTimeoutMs)));
    for (const g of groups) g.shutdown(opts.drainTimeoutMs, drain.deadlineMessage(opts.drainTimeoutMs));
    // A bound for a group that never says bye (a hung rank); a group that drains ends the wait itself.
    const deadline = new Promise<void>((done) => setTimeout(done, opts.drainTimeoutMs + 10_000).unref());
    await Promise.race([Promise.all(groups.map((g) => g.settled())), deadline]);
  }
  await closePorts(ports, code === 0);
  await Promise.all(contexts.map((ctx) => ctx.tokenizerPool.close()));
  clearInterval(poll);
  clearInterval(watch);
  clearInterval(heartbeat);
  linksClosed = true;
  links.close();
  for (const g of groups) if (g.status !== 'stopped') g.killSurvivors();
  // MPI_Finalize waits for every connected process: only when every group ended in order (a spawned group that
  // failed was never connected to in a way that outlives it; a no-spawn job shares one MPI_COMM_WORLD).
  if (plan.spawn || groups.every((g) => g.status === 'stopped')) loadAddon().commFinalize();
  log.info('stopped');
  return exitCode;
}
