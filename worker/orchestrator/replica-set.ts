// `--dp N`: one model served by N worker groups (replicas) behind one name. The replica set is the model's executor
// in the catalog: each request goes to one replica's RemoteExecutor, chosen by the router — the fewest outstanding
// requests (least-load); the fewest KV blocks of work, counting what the replica's prefix cache already holds of the
// prompt and the new work its requests in flight brought (kv); or each live replica in turn (round-robin, the baseline
// routing is measured against). Stats are sums over the live replicas; per-replica gauges carry a `replica` label.
// A replica that fails is dropped (only with --isolate-failures does the cluster go on; the orchestrator decides):
// its requests end with an error naming it (remote-executor.ts), the others keep serving.
import { Counter, Gauge, type Registry } from 'prom-client';

import type { IterationStats, KvCacheEvent, NativeErrorCode, KvCacheStats, ModelConfig, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { RequestHandle } from '../executor/request-handle.js';
import type { ServingExecutor } from '../executor/serving-executor.js';
import { type RequestLimits, validateRequest } from '../executor/validate-request.js';
import type { ROUTERS } from '../options/serve-option-table.js';
import { promptBlockHashes } from './kv-block-hash.js';
import { chooseByCost, chooseReplica, KvPrefixIndex, nextReplica } from './kv-router.js';
import type { RemoteExecutor } from './remote-executor.js';

export type RouterKind = (typeof ROUTERS)[number];

/** What the set needs of a replica's worker group (worker-group.ts). */
export interface ReplicaGroup {
  readonly status: string;
  readonly executor: RemoteExecutor | undefined;
  readonly reason: string | undefined;
}

// The kv router never waits for events before a decision (waiting for a busy replica's answer cost every later
// turn up to that wait in time to first token): it notes a routed prompt's blocks itself, and asks the replicas for
// their events in the background — answers' blocks, evictions, restarts — when a request has ended since the last
// poll or the last poll is older than this.
const KV_POLL_MS = 250;
// How long a poll waits for a replica's answer before the poll ends (the late answer is still taken when it comes).
const KV_ROUTE_WAIT_MS = 100;
// Events kept for POST /kv_cache_events between two reads of it (the router reads them too); the oldest go first.
const KV_EVENTS_KEPT = 65_536;

interface InFlight { replica: number; remoteId: number | undefined; cancelled: boolean; blocks: number }

export class ReplicaSet implements ServingExecutor {
  readonly modelConfig: ModelConfig;
  readonly limits: RequestLimits;
  private readonly inflight = new Map<number, InFlight>();
  private readonly listeners = new Set<(batch: IterationStats[]) => void>();
  private readonly index: KvPrefixIndex;
  private readonly routed: number[];
  private nextId = 1;
  private lastRouted = -1;  // round-robin: the replica the previous request went to
  private readonly loadBlocks: number[];  // kv: blocks of new work in flight per replica (uncached prompt + output)
  private closed = false;
  private stale = true;
  private lastPoll = 0;
  private polling: Promise<void> | undefined;
  private events: KvCacheEvent[] = [];   // polled, not yet drained by /kv_cache_events
  private readonly gauges: { outstanding: Gauge; routed: Counter; reused: Gauge; used: Gauge; ready: Gauge } | undefined;

  constructor(private readonly model: string, private readonly replicas: readonly ReplicaGroup[], private readonly router: RouterKind,
    registry?: Registry) {
    const first = replicas.find((r) => r.executor)?.executor;
    if (!first) throw new Error(`model '${model}': a replica set needs at least one ready replica`);
    this.modelConfig = first.modelConfig;
    this.limits = first.limits;
    this.index = new KvPrefixIndex(replicas.length);
    this.routed = replicas.map(() => 0);
    this.loadBlocks = replicas.map(() => 0);
    // (Several replicated models of one --multi-model repository share the families: one per name in a registry.)
    const family = <T>(name: string, make: () => T): T => (registry?.getSingleMetric(name) as T | undefined) ?? make();
    const labelNames = ['model', 'replica'];
    this.gauges = registry === undefined ? undefined : {
      outstanding: family('trtllm_replica_outstanding_requests', () => new Gauge({ name: 'trtllm_replica_outstanding_requests', help: 'requests routed to the replica and not yet finished', labelNames, registers: [registry] })),
      routed: family('trtllm_replica_requests_routed_total', () => new Counter({ name: 'trtllm_replica_requests_routed_total', help: 'requests the router sent to the replica', labelNames, registers: [registry] })),
      reused: family('trtllm_replica_kv_cache_reused_blocks', () => new Gauge({ name: 'trtllm_replica_kv_cache_reused_blocks', help: 'KV cache blocks the replica reused from its prefix cache (cumulative)', labelNames, registers: [registry] })),
      used: family('trtllm_replica_kv_cache_used_blocks', () => new Gauge({ name: 'trtllm_replica_kv_cache_used_blocks', help: 'KV cache blocks in use on the replica', labelNames, registers: [registry] })),
      ready: family('trtllm_replica_ready', () => new Gauge({ name: 'trtllm_replica_ready', help: '1 while the replica serves, 0 once it failed or stopped', labelNames, registers: [registry] })),
    };
    for (let r = 0; r < replicas.length; r += 1) this.gauges?.routed.inc(this.labels(r), 0);
  }

  private labels(r: number) {
    return { model: this.model, replica: String(r) };
  }

  private live(r: number): RemoteExecutor | undefined {
    const g = this.replicas[r]!;
    return g.status === 'ready' && g.executor && g.executor.failure === undefined ? g.executor : undefined;
  }

  /** At least one replica serves (the model's readiness once every replica has come up). */
  anyLive(): boolean {
    return this.replicas.some((_, r) => this.live(r) !== undefined);
  }

  /** Requests each replica has in flight (the least-load router's measure; also a test's view of the spread). */
  outstanding(): number[] {
    return this.replicas.map((g) => g.executor?.numActiveRequests() ?? 0);
  }

  /** Requests routed to each replica since the start. */
  routedCounts(): number[] {
    return [...this.routed];
  }

  enqueue(request: NativeRequest): RequestHandle {
    if (this.closed) throw new TrtllmError(`model '${this.model}' is shutting down`, 'shutdown');
    const valid = validateRequest(request, this.limits);
    if (!this.anyLive()) throw new TrtllmError(this.noReplica(), 'shutdown');
    const id = this.nextId++;
    const handle = new RequestHandle(id, (rid) => this.cancel(rid));
    const entry: InFlight = { replica: -1, remoteId: undefined, cancelled: false, blocks: 0 };
    this.inflight.set(id, entry);
    void handle.responses().then(() => {
      this.inflight.delete(id);
      if (entry.replica >= 0) this.loadBlocks[entry.replica]! -= entry.blocks;
      this.stale = true;
    });
    if (this.router === 'kv' && (this.stale || Date.now() - this.lastPoll > KV_POLL_MS)) void this.poll(KV_ROUTE_WAIT_MS);
    this.dispatch(valid, handle, entry);
    return handle;
  }

  private noReplica(): string {
    const why = this.replicas.map((g, r) => `replica ${r}: ${g.reason ?? g.status}`).join('; ');
    return `model '${this.model}' is not available: no replica is serving (${why})`;
  }

  private dispatch(request: NativeRequest, handle: RequestHandle, entry: InFlight): void {
    const live = this.replicas.map((_, r) => this.live(r) !== undefined);
    const tokensPerBlock = this.replicas.find((g) => g.executor)?.executor?.kvCacheStats().tokensPerBlock ?? 0;
    const kv = this.router === 'kv' && tokensPerBlock > 0;
    const hashes = kv ? promptBlockHashes(request.inputTokenIds, tokensPerBlock) : [];
    const prefix = kv ? this.index.matchHashes(hashes) : [];
    const r = this.router === 'round-robin' ? nextReplica(live, this.lastRouted)
      : kv ? chooseByCost(live, hashes.length, prefix, this.loadBlocks, this.outstanding())
        : chooseReplica(live, this.outstanding(), live.map(() => 0));
    if (r >= 0) {
      this.lastRouted = r;
      this.index.add(r, hashes);
      // The work it brings there: the prompt blocks not cached and the blocks its output will fill.
      entry.blocks = kv ? Math.ceil((request.inputTokenIds.length - prefix[r]! * tokensPerBlock + request.maxTokens) / tokensPerBlock) : 0;
      this.loadBlocks[r]! += entry.blocks;
    }
    const executor = r < 0 ? undefined : this.live(r);
    if (!executor) {
      handle.push({ requestId: handle.id, isFinal: true, error: { code: 'shutdown', message: this.noReplica() } });
      return;
    }
    try {
      entry.replica = r;
      entry.remoteId = executor.enqueueInto(request, handle);
      this.routed[r]! += 1;
      this.gauges?.routed.inc(this.labels(r));
      if (entry.cancelled) executor.cancel(entry.remoteId);
    } catch (error) {
      const e = error as TrtllmError;
      handle.push({ requestId: handle.id, isFinal: true, error: { code: (e.code ?? 'internal') as NativeErrorCode, message: e.message } });
    }
  }

  cancel(requestId: number): void {
    const entry = this.inflight.get(requestId);
    if (!entry) return;
    entry.cancelled = true;
    if (entry.remoteId !== undefined) this.replicas[entry.replica]?.executor?.cancel(entry.remoteId);
  }

  async generate(request: NativeRequest): Promise<NativeResponse> {
    return this.enqueue(request).result();
  }

  /** Asks every live replica for its KV cache events (at most `waitMs` for each answer; a later one is taken at the
   * next poll), feeds the router's index and keeps them for /kv_cache_events. One poll at a time. */
  private poll(waitMs: number): Promise<void> {
    if (this.polling) return this.polling;
    this.stale = false;
    this.polling = (async () => {
      await Promise.all(this.replicas.map(async (_, r) => {
        const executor = this.live(r);
        if (!executor) {
          this.index.forget(r);
          return;
        }
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => { timer = setTimeout(() => resolve('late'), waitMs); });
        const drained = Promise.resolve(executor.getLatestKvCacheEvents());
        const events = await Promise.race([drained, late]);
        clearTimeout(timer);
        // A replica slower than the wait: its events (drained from it already) are taken when they come, not lost.
        if (events === 'late') void drained.then((later) => this.take(r, later));
        else this.take(r, events);
      }));
      if (this.events.length > KV_EVENTS_KEPT) this.events.splice(0, this.events.length - KV_EVENTS_KEPT);
      this.lastPoll = Date.now();
    })().finally(() => { this.polling = undefined; });
    return this.polling;
  }

  /** Replica r's drained events: into the router's index, and kept for /kv_cache_events. */
  private take(r: number, events: KvCacheEvent[]): void {
    this.index.apply(r, events);
    for (const e of events) this.events.push({ ...e, replica: r });
  }

  /** Every replica's events since the last drain, replica by replica, each carrying its replica index. */
  async getLatestKvCacheEvents(): Promise<KvCacheEvent[]> {
    await this.poll(KV_ROUTE_WAIT_MS * 20);
    const events = this.events;
    this.events = [];
    return events;
  }

  iterationStats(): IterationStats[] {
    const batch: IterationStats[] = [];
    for (const g of this.replicas) if (g.executor) batch.push(...g.executor.iterationStats());
    if (batch.length > 0) for (const listener of this.listeners) listener(batch);
    return batch;
  }

  onIterationStats(listener: (batch: IterationStats[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Sums over the replicas that serve (tokens per block is every replica's own). */
  kvCacheStats(): KvCacheStats {
    const sum: KvCacheStats = { maxNumBlocks: 0, freeNumBlocks: 0, usedNumBlocks: 0, tokensPerBlock: 0, allocTotalBlocks: 0, allocNewBlocks: 0, reusedBlocks: 0 };
    for (const [r, g] of this.replicas.entries()) {
      const s = g.executor?.kvCacheStats();
      if (this.gauges) {
        this.gauges.ready.set(this.labels(r), this.live(r) ? 1 : 0);
        this.gauges.outstanding.set(this.labels(r), g.executor?.numActiveRequests() ?? 0);
        this.gauges.reused.set(this.labels(r), s?.reusedBlocks ?? 0);
        this.gauges.used.set(this.labels(r), s?.usedNumBlocks ?? 0);
      }
      if (!s || !this.live(r)) continue;
      sum.maxNumBlocks += s.maxNumBlocks;
      sum.freeNumBlocks += s.freeNumBlocks;
      sum.usedNumBlocks += s.usedNumBlocks;
      sum.tokensPerBlock = s.tokensPerBlock;
      sum.allocTotalBlocks += s.allocTotalBlocks;
      sum.allocNewBlocks += s.allocNewBlocks;
      sum.reusedBlocks += s.reusedBlocks;
    }
    return sum;
  }

  /** Per replica KV stats (tests, /v2/repository/index's reasons). */
  replicaKvStats(): (KvCacheStats | undefined)[] {
    return this.replicas.map((g) => g.executor?.kvCacheStats());
  }

  numActiveRequests(): number {
    return this.inflight.size;
  }

  async shutdown(): Promise<void> {
    this.closed = true;
  }
}
