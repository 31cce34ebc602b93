// Drives a benchmark: warm-up requests first (not measured), then each request at its arrival time, with at
// most --concurrency in flight, recording when it was sent, when each token-carrying response arrived and when
// it ended. A request the server refuses is recorded as failed with its error and the run goes on; a server that
// went away (it no longer answers at all) ends the run with an error naming it, in the warm-up or later.
// Multi-turn traffic arrives by conversation: each conversation starts at its arrival time and sends its turns one
// after the other, each once the previous answer is in, under the same --concurrency limit.
import { ToolError } from '../client/tool-error.js';
import { type Conversation, playConversation } from './conversations.js';
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

/** The measured part's shared machinery: its clock, the --concurrency slots, progress, and the server watch. */
class Measurement {
  readonly watch: ServerWatch;
  private readonly t0 = performance.now();
  private active = 0;
  done = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly target: BenchTarget, private readonly plan: RunPlan, readonly total: number) {
    this.watch = new ServerWatch(target);
    plan.onProgress?.(0, total);
  }

  now(): number {
    return performance.now() - this.t0;
  }

  /** Waits until the run's clock reaches ms. */
  async at(ms: number): Promise<void> {
    const wait = ms - this.now();
    if (wait > 0) await sleep(wait);
  }

  async acquire(): Promise<void> {
    while (this.plan.concurrency !== undefined && this.active >= this.plan.concurrency) await new Promise<void>((r) => this.waiting.push(r));
    this.active += 1;
  }

  /** Frees a slot; its request has ended, for the progress. */
  release(): void {
    this.active -= 1;
    this.ended(1);
    this.waiting.shift()?.();
  }

  /** Requests that ended: sent and answered (or failed), or never to be sent (after a failed turn). */
  ended(n: number): void {
    if (n === 0) return;
    this.done += n;
    this.plan.onProgress?.(this.done, this.total);
  }

  /** Sends one request and records it; resolves with its answer's token ids, or undefined when it failed. */
  async send(request: BenchRequest, extra: Partial<RequestRecord> = {}): Promise<{ record: RequestRecord; answer: number[] | undefined }> {
    const startMs = this.now();
    const chunkTimesMs: number[] = [];
    const base = { inputTokens: request.inputIds.length, startMs, chunkTimesMs, ...extra };
    try {
      const answer = await this.target.send(request, () => chunkTimesMs.push(this.now()));
      return { record: { ...base, ok: true, outputTokens: answer.length, endMs: this.now() }, answer };
    } catch (error) {
      const record = { ...base, ok: false, error: (error as Error).message, outputTokens: 0, endMs: this.now() };
      await this.watch.afterFailure((error as Error).message);
      return { record, answer: undefined };
    }
  }

  /** A server that went away ends the run as an error, whatever was measured before. */
  finish(): void {
    if (this.watch.gone !== undefined) {
      throw new ToolError(`the server at ${this.target.where} went away during the measurement (${this.watch.gone}) after ${this.done} of ${this.total} ` +
        `requests had ended; the first failed request: ${this.watch.firstError}`, 1);
    }
  }
}

export async function runRequests(target: BenchTarget, requests: BenchRequest[], plan: RunPlan): Promise<RequestRecord[]> {
  await warmUp(target, requests, plan.warmup);
  const m = new Measurement(target, plan, requests.length);
  const records: RequestRecord[] = new Array(requests.length);
  const tasks: Promise<void>[] = [];
  for (let i = 0; i < requests.length && m.watch.gone === undefined; i += 1) {
    await m.at(plan.arrivalsMs[i]!);
    await m.acquire();
    if (m.watch.gone !== undefined) break;
    tasks.push(m.send(requests[i]!).then(({ record }) => { records[i] = record; }).finally(() => m.release()));
  }
  await Promise.all(tasks);
  m.finish();
  return records;
}

/**
 * Multi-turn traffic: conversation c starts at arrivalsMs[c]; each of its turns takes a --concurrency slot, is sent
 * when the previous turn's answer is in and carries that answer in its prompt. A failed turn ends its conversation
 * (the rest cannot be built); the records are in the order the turns were sent. `warmupRequests` are unrelated to
 * the conversations, so the warm-up does not put their prefixes in the server's cache.
 */
export async function runConversations(
  target: BenchTarget, conversations: Conversation[], warmupRequests: BenchRequest[], plan: RunPlan,
): Promise<RequestRecord[]> {
  await warmUp(target, warmupRequests, plan.warmup);
  const total = conversations.reduce((n, c) => n + c.turns.length, 0);
  const m = new Measurement(target, plan, total);
  const records: RequestRecord[] = [];
  const sentGroups = new Set<number>();
  const play = async (c: Conversation) => {
    const sent = await playConversation(c, sentGroups, async (turn) => {
      await m.acquire();
      if (m.watch.gone !== undefined) {
        m.release();   // not sent: it ends here, as the turns after it
        return undefined;
      }
      const { record, answer } = await m.send(turn, { conversation: turn.conversation, turn: turn.turn, newInputTokens: turn.newInputTokens });
      records.push(record);
      m.release();
      return answer;
    });
    m.ended(c.turns.length - sent);
  };
  const tasks: Promise<void>[] = [];
  for (const [i, c] of conversations.entries()) {
    if (m.watch.gone !== undefined) break;
    await m.at(plan.arrivalsMs[i]!);
    tasks.push(play(c));
  }
  await Promise.all(tasks);
  m.finish();
  return records;
}
