// The orchestrator's stand-in for one worker group's executor: requests are validated here (the same rules and
// limits as in the group, so bad input is answered without a round trip), sent to the group's leader over the
// link, and its responses routed back to the request handles. When the group dies, every request in flight ends
// with an error naming the model and the cause, and new ones are refused with 'shutdown' (503). Its KV cache events
// are asked for over the link when drained (TAG.kvEventsAsk), with a bounded wait.
import type { IterationStats, KvCacheEvent, KvCacheStats, ModelConfig, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { RequestHandle } from '../executor/request-handle.js';
import type { ServingExecutor } from '../executor/serving-executor.js';
import { type RequestLimits, validateRequest } from '../executor/validate-request.js';
import { type Hello, KV_EVENTS_REPLY_MS, type KvEvents, type Stats, TAG } from './wire.js';

export type SendToGroup = (tag: number, body: unknown) => void;

export class RemoteExecutor implements ServingExecutor {
  readonly modelConfig: ModelConfig;
  readonly limits: RequestLimits;
  private readonly handles = new Map<number, RequestHandle>();
  private readonly listeners = new Set<(batch: IterationStats[]) => void>();
  private iterations: IterationStats[] = [];
  private kv: KvCacheStats;
  private nextId = 1;
  private unavailable: string | undefined;
  private closed = false;
  private kvEvents: KvCacheEvent[] = [];  // answered but not yet drained (an answer later than its wait lands here)
  private kvAsked = 0;
  private readonly kvWaiters = new Map<number, () => void>();

  /** `canAsk`: whether the group's link takes a question now (its group is ready: not loading, stopping or gone). */
  constructor(private readonly model: string, hello: Hello, private readonly send: SendToGroup,
    private readonly canAsk: () => boolean) {
    this.modelConfig = hello.modelConfig;
    this.limits = hello.limits;
    this.kv = hello.kv;
  }

  enqueue(request: NativeRequest): RequestHandle {
    const id = this.nextId;
    const handle = new RequestHandle(id, (rid) => this.cancel(rid));
    this.enqueueInto(request, handle);
    return handle;
  }

  /** Enqueues with responses pushed into `handle` (a replica set's own handle, whose id is not ours); returns the
   * id the group knows the request by (for cancel). */
  enqueueInto(request: NativeRequest, handle: RequestHandle): number {
    if (this.unavailable !== undefined) throw new TrtllmError(this.unavailable, 'shutdown');
    if (this.closed) throw new TrtllmError(`model '${this.model}' is shutting down`, 'shutdown');
    const valid = validateRequest(request, this.limits);
    const id = this.nextId++;
    this.handles.set(id, handle);
    this.send(TAG.enqueue, { id, request: valid });
    return id;
  }

  async generate(request: NativeRequest): Promise<NativeResponse> {
    return this.enqueue(request).result();
  }

  cancel(requestId: number): void {
    if (this.handles.has(requestId) && this.unavailable === undefined) this.send(TAG.cancel, { id: requestId });
  }

  /** One iteration's responses from the group. */
  deliver(batch: NativeResponse[]): void {
    for (const response of batch) {
      const handle = this.handles.get(response.requestId);
      if (!handle) continue;
      if (response.isFinal) this.handles.delete(response.requestId);
      handle.push(handle.id === response.requestId ? response : { ...response, requestId: handle.id });
    }
  }

  /** The group's periodic stats: iterations are kept until the next iterationStats() drains them. */
  updateStats(stats: Stats): void {
    this.kv = stats.kv;
    if (stats.iterations.length > 0) this.iterations.push(...stats.iterations);
  }

  /** The group's answer to a kvEventsAsk: its events are kept (in the group's order) until a drain takes them. */
  deliverKvEvents(answer: KvEvents): void {
    if (this.unavailable !== undefined) return;
    this.kvEvents.push(...answer.events);
    this.kvWaiters.get(answer.id)?.();
  }

  /** The group is gone: end what is in flight, refuse what comes. */
  fail(reason: string): void {
    if (this.unavailable !== undefined) return;
    this.unavailable = reason;
    this.kvEvents = [];  // a dead group contributes no events, and nobody waits for its answer
    for (const wake of this.kvWaiters.values()) wake();
    for (const handle of this.handles.values()) {
      handle.push({ requestId: handle.id, isFinal: true, error: { code: 'shutdown', message: reason } });
    }
    this.handles.clear();
  }

  get failure(): string | undefined {
    return this.unavailable;
  }

  iterationStats(): IterationStats[] {
    const batch = this.iterations;
    this.iterations = [];
    if (batch.length > 0) for (const listener of this.listeners) listener(batch);
    return batch;
  }

  onIterationStats(listener: (batch: IterationStats[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  kvCacheStats(): KvCacheStats {
    return this.kv;
  }

  /** Drains the group's KV cache events: asks its leader and waits at most KV_EVENTS_REPLY_MS for the answer. A group
   * that is not ready (or gone) is not asked and contributes nothing. */
  async getLatestKvCacheEvents(): Promise<KvCacheEvent[]> {
    if (this.unavailable === undefined && !this.closed && this.canAsk()) {
      const id = ++this.kvAsked;
      let timer: NodeJS.Timeout | undefined;
      const answered = new Promise<void>((resolve) => {
        this.kvWaiters.set(id, resolve);
        timer = setTimeout(resolve, KV_EVENTS_REPLY_MS);
      });
      this.send(TAG.kvEventsAsk, { id });
      await answered;
      clearTimeout(timer);
      this.kvWaiters.delete(id);
    }
    if (this.unavailable !== undefined) return [];
    const events = this.kvEvents;
    this.kvEvents = [];
    return events;
  }

  numActiveRequests(): number {
    return this.handles.size;
  }

  /** Stops taking requests; the orchestrator drains the group itself (TAG.shutdown). */
  async shutdown(): Promise<void> {
    this.closed = true;
  }
}
