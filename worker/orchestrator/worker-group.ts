// The orchestrator's view of one worker group: loading → ready → (stopped | failed). It learns the group's
// processes from its hello (or load failure), watches them, and turns the group's messages into the remote
// executor's responses and stats. A group that fails takes nothing else with it: its requests end with an error
// naming the model, its surviving processes on this host are killed, and its link is dropped unused.
import { hostname } from 'node:os';

import type { NativeResponse } from '../binding/addon-types.js';
import type { Logger } from '../log.js';
import { processAlive } from './process-alive.js';
import type { GroupPlan } from './plan.js';
import { RemoteExecutor } from './remote-executor.js';
import { decode, encode, type Hello, type KvEvents, type LoadFailed, type RankIdentity, type Shutdown, type Stats, TAG } from './wire.js';

export type GroupStatus = 'loading' | 'ready' | 'stopping' | 'stopped' | 'failed';

export interface GroupLink {
  send(tag: number, bytes: Uint8Array): void;
  drop(): void;        // stop using the link (a dead peer)
  close(): void;       // orderly end after the group's bye
}

const REMOTE_SILENCE_MS = 10_000;  // a leader on another host that says nothing (stats come twice a second) is gone

export class WorkerGroup {
  status: GroupStatus = 'loading';
  reason: string | undefined;
  executor: RemoteExecutor | undefined;
  ranks: RankIdentity[] = [];
  private lastHeard = Date.now();
  private readonly here = hostname();
  private readonly waiters: (() => void)[] = [];

  constructor(readonly index: number, readonly plan: GroupPlan, private readonly link: GroupLink, private readonly log: Logger,
    private readonly onFailure: (group: WorkerGroup) => void) {}

  get name(): string {
    return this.plan.name;
  }

  /** How messages name the group: the model, and under --dp which replica of it. */
  get label(): string {
    return this.plan.replica === undefined ? this.name : `${this.name} replica ${this.plan.replica}`;
  }

  /** Resolves once the group is no longer loading (ready, failed) or no longer stopping (stopped, failed). */
  settled(): Promise<void> {
    if (this.status !== 'loading' && this.status !== 'stopping') return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  receive(tag: number, bytes: Buffer): void {
    this.lastHeard = Date.now();
    if (this.status === 'failed') return;
    switch (tag) {
      case TAG.hello: {
        const hello = decode<Hello>(bytes);
        this.ranks = hello.ranks;
        this.executor = new RemoteExecutor(this.label, hello, (t, body) => this.link.send(t, encode(body)), () => this.status === 'ready');
        this.status = 'ready';
        this.log.info(`model ${this.label}: ready on ${hello.ranks.length} rank(s) (${hello.ranks.map((r) => `pid ${r.pid}@${r.host}`).join(', ')}), loaded in ${hello.loadSeconds.toFixed(2)} s`);
        this.wake();
        break;
      }
      case TAG.members:
        this.ranks = decode<RankIdentity[]>(bytes);
        break;
      case TAG.loadFailed: {
        const failed = decode<LoadFailed>(bytes);
        this.ranks = failed.ranks;
        this.fail(`loading failed (${failed.code}): ${failed.message}`);
        break;
      }
      case TAG.responses:
        this.executor?.deliver(decode<NativeResponse[]>(bytes));
        break;
      case TAG.stats:
        this.executor?.updateStats(decode<Stats>(bytes));
        break;
      case TAG.kvEvents:
        this.executor?.deliverKvEvents(decode<KvEvents>(bytes));
        break;
      case TAG.bye:
        this.status = 'stopped';
        this.link.close();
        this.wake();
        break;
      default:
        this.log.warn(`model ${this.label}: unknown message tag ${tag} ignored`);
    }
  }

  /** Called a few times a second: a dead process of the group (or a silent remote leader) fails the group. */
  check(): void {
    if (this.status === 'failed' || this.status === 'stopped') return;
    for (const [rank, r] of this.ranks.entries()) {
      if (r.host === this.here && !processAlive(r.pid)) {
        this.fail(`its rank ${rank} (pid ${r.pid} on ${r.host}) exited`);
        return;
      }
    }
    const leader = this.ranks[0];
    if (this.status === 'ready' && leader && leader.host !== this.here && Date.now() - this.lastHeard > REMOTE_SILENCE_MS) {
      this.fail(`its leader on ${leader.host} has been silent for ${REMOTE_SILENCE_MS / 1000} s`);
    }
  }

  heartbeat(): void {
    if (this.status === 'ready') this.link.send(TAG.heartbeat, encode({}));
  }

  shutdown(drainMs: number, cutMessage?: string): void {
    if (this.status !== 'ready') return;
    this.status = 'stopping';
    const body: Shutdown = { drainMs, ...(cutMessage === undefined ? {} : { cutMessage }) };
    this.link.send(TAG.shutdown, encode(body));
  }

  fail(reason: string): void {
    if (this.status === 'failed' || this.status === 'stopped') return;
    this.status = 'failed';
    this.reason = reason;
    this.log.error(`model ${this.label} is not available: ${reason}`);
    this.executor?.fail(`model '${this.name}'${this.plan.replica === undefined ? '' : ` replica ${this.plan.replica}`} is not available: ${reason}`);
    this.link.drop();
    this.killSurvivors();
    this.wake();
    this.onFailure(this);
  }

  /** Ranks of a failed group that are still up would hang in a collective with the dead one forever. */
  killSurvivors(): void {
    for (const r of this.ranks) {
      if (r.host !== this.here || !processAlive(r.pid)) continue;
      try {
        process.kill(r.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
