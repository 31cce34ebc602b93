// A worker group's rank 0 in orchestrator mode: loads the model (its followers load their shards alongside),
// says hello to the orchestrator, then runs the requests that arrive over the link and sends every iteration's
// responses back, with the executor's stats twice a second and its KV cache events when asked. On the orchestrator's
// shutdown message it drains, says bye and stops; the followers are released by the executor's shutdown as in leader
// mode.
import type { AddonLinks, NativeErrorCode, NativeResponse } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { Executor } from '../executor/executor.js';
import type { Logger } from '../log.js';
import { executorOptions } from '../options/executor-options.js';
import { kvCacheEventsProblem } from '../options/serve-option-table.js';
import { loadTokenizer } from '../tokenizer.js';
import {
  type Cancel, decode, encode, type Enqueue, type Hello, type KvEvents, type KvEventsAsk, type LoadFailed, type RankIdentity, type Shutdown,
  STATS_INTERVAL_MS, type Stats, TAG, withRequestId,
} from './wire.js';
import type { GroupPlan } from './plan.js';

const LINK = 0;

const ORCHESTRATOR_SILENCE_MS = 10_000;  // it sends a heartbeat every second

export async function runGroupLeader(group: GroupPlan, links: AddonLinks, ranks: RankIdentity[], orchestratorRemote: boolean, log: Logger): Promise<number> {
  const send = (tag: number, body: unknown) => links.send(LINK, tag, encode(body));
  send(TAG.members, ranks);
  let executor: Executor;
  const started = performance.now();
  try {
    // The launcher refuses this before anything starts (plan-groups.ts); a plan built otherwise fails here, named.
    const events = kvCacheEventsProblem(group.serve);
    if (events) throw new TrtllmError(events, 'invalid_argument');
    executor = await Executor.load(group.serve.model, executorOptions(group.serve));
    const tokenizer = loadTokenizer(group.serve.model);
    const endId = tokenizer.eosTokenId ?? executor.modelConfig.eosTokenIds[0] ?? -1;
    // Warm-up, as a leader-mode server does before it says ready.
    await executor.generate({ inputTokenIds: [tokenizer.bosTokenId ?? (endId >= 0 ? endId : 0)], maxTokens: 1 });
    executor.iterationStats();
  } catch (error) {
    const code = (error instanceof TrtllmError ? error.code : 'internal') as NativeErrorCode;
    const failed: LoadFailed = { code, message: (error as Error).message, ranks };
    send(TAG.loadFailed, failed);
    await flush(links);
    log.error(`model ${group.name} failed to load: ${(error as Error).message}`);
    return 1;
  }
  const hello: Hello = {
    modelConfig: executor.modelConfig, limits: executor.limits, ranks, kv: executor.kvCacheStats(),
    loadSeconds: (performance.now() - started) / 1000,
  };

  const ids = new Map<number, number>();  // this executor's request id → the orchestrator's
  executor.onResponses((batch) => {
    const out: NativeResponse[] = [];
    for (const response of batch) {
      const theirs = ids.get(response.requestId);
      if (theirs === undefined) continue;
      if (response.isFinal) ids.delete(response.requestId);
      out.push(withRequestId(response, theirs));
    }
    if (out.length > 0) send(TAG.responses, out);
  });
  const ours = new Map<number, number>();  // the orchestrator's id → this executor's, while running
  const stats = setInterval(() => {
    const body: Stats = { iterations: executor.iterationStats(), kv: executor.kvCacheStats(), active: executor.numActiveRequests() };
    send(TAG.stats, body);
  }, STATS_INTERVAL_MS);

  // An orchestrator on another host cannot be watched by pid: its silence is the sign that it is gone.
  let lastHeard = Date.now();
  const silence = setInterval(() => {
    if (!orchestratorRemote || Date.now() - lastHeard < ORCHESTRATOR_SILENCE_MS) return;
    log.error(`the orchestrator has been silent for ${ORCHESTRATOR_SILENCE_MS / 1000} s: stopping`);
    process.kill(process.pid, 'SIGKILL');
  }, 1000);
  silence.unref();
  const done = new Promise<Shutdown>((resolveShutdown) => {
    links.listen((messages) => {
      lastHeard = Date.now();
      for (const [, tag, bytes] of messages) {
        if (tag === TAG.enqueue) {
          const { id, request } = decode<Enqueue>(bytes);
          try {
            const handle = executor.enqueue(request);
            ids.set(handle.id, id);
            ours.set(id, handle.id);
            handle.responses().then(() => ours.delete(id), () => ours.delete(id));
          } catch (error) {
            const code = (error instanceof TrtllmError ? error.code : 'internal') as NativeErrorCode;
            send(TAG.responses, [{ requestId: id, isFinal: true, error: { code, message: (error as Error).message } }]);
          }
        } else if (tag === TAG.cancel) {
          const local = ours.get(decode<Cancel>(bytes).id);
          if (local !== undefined) executor.cancel(local);
        } else if (tag === TAG.kvEventsAsk) {
          const answer: KvEvents = { id: decode<KvEventsAsk>(bytes).id, events: executor.getLatestKvCacheEvents() };
          send(TAG.kvEvents, answer);
        } else if (tag === TAG.shutdown) {
          resolveShutdown(decode<Shutdown>(bytes));
        }
      }
    });
  });
  send(TAG.hello, hello);
  log.info(`model ${group.name} ready (tp ${group.tp} x pp ${group.pp}, loaded in ${hello.loadSeconds.toFixed(2)} s)`);

  // The orchestrator's drain timeout (its serve --drain-timeout): what is left then is cancelled here, while the
  // link is still up, so its final responses reach the orchestrator before the bye.
  const { drainMs, cutMessage } = await done;
  await executor.drain(Date.now() + drainMs, undefined, cutMessage);
  clearInterval(stats);
  clearInterval(silence);
  send(TAG.bye, {});
  await flush(links);
  links.close();
  await executor.shutdown();  // releases the followers and ends MPI (leaving the orchestrator's intercommunicator)
  return 0;
}

/** Waits until the link's sends are done, so a message is not lost when the process ends right after. */
async function flush(links: AddonLinks): Promise<void> {
  const deadline = Date.now() + 5000;
  while (links.pending(LINK) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}
