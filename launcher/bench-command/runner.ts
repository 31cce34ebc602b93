// Drives a benchmark: warm-up requests first (not measured), then each request at its arrival time, with at
// most --concurrency in flight, recording when it was sent, when each token-carrying response arrived and when
// it ended. A request the server refuses is recorded as failed with its error and the run goes on; a server that
// went away (it no longer answers at all) ends the run with an error naming it, in the warm-up or later.
import { ToolError } from '../client/tool-error.js';
import { ServerWatch } from './server-watch.js';
import type { RequestRecord } from './summary.js';
import type { BenchRequest } from './sources.js';
import type { BenchTarget } from './targets.js';

export interface RunPlan {
  arrivalsMs: number[];
  concurrency: number | undefined;     // undefined: no limit
  warmup: number;
  onProgress?: (done: number, total: number) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Warm-up failures are real errors: a setup that cannot serve one request is not worth measuring. */
async function warmUp(target: BenchTarget, requests: BenchRequest[], count: number): Promise<void> {
  for (let i = 0; i < count && requests.length > 0; i += 1) {
    try {
      await target.send(requests[i % requests.length]!, () => {});
    } catch (error) {
      const failed = `warm-up request ${i + 1} of ${count} failed: ${(error as Error).message}`;
      const gone = await target.liveness();
      throw new ToolError(gone === undefined ? failed : `the server at ${target.where} went away during the warm-up (${gone}); ${failed}`, 1);
    }
  }
}

export async function runRequests(target: BenchTarget, requests: BenchRequest[], plan: RunPlan): Promise<RequestRecord[]> {
  await warmUp(target, requests, plan.warmup);
  const watch = new ServerWatch(target);
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  const records: RequestRecord[] = new Array(requests.length);
  let active = 0;
  let done = 0;
  const waiting: (() => void)[] = [];
  const acquire = async () => {
    while (plan.concurrency !== undefined && active >= plan.concurrency) await new Promise<void>((r) => waiting.push(r));
    active += 1;
  };
  const release = () => {
    active -= 1;
    done += 1;
    plan.onProgress?.(done, requests.length);
    waiting.shift()?.();
  };
  const one = async (i: number) => {
    const request = requests[i]!;
    const startMs = now();
    const chunkTimesMs: number[] = [];
    const base = { inputTokens: request.inputIds.length, startMs, chunkTimesMs };
    try {
      const outputTokens = await target.send(request, () => chunkTimesMs.push(now()));
      records[i] = { ...base, ok: true, outputTokens, endMs: now() };
    } catch (error) {
      records[i] = { ...base, ok: false, error: (error as Error).message, outputTokens: 0, endMs: now() };
      await watch.afterFailure((error as Error).message);
    }
  };
  const tasks: Promise<void>[] = [];
  plan.onProgress?.(0, requests.length);
  for (let i = 0; i < requests.length && watch.gone === undefined; i += 1) {
    const wait = plan.arrivalsMs[i]! - now();
    if (wait > 0) await sleep(wait);
    await acquire();
    if (watch.gone !== undefined) break;
    tasks.push(one(i).finally(release));
  }
  await Promise.all(tasks);
  if (watch.gone !== undefined) {
    throw new ToolError(`the server at ${target.where} went away during the measurement (${watch.gone}) after ${done} of ${requests.length} ` +
      `requests had ended; the first failed request: ${watch.firstError}`, 1);
  }
  return records;
}
