// The orchestrator's stand-in for one worker group's executor: requests are validated here (the same rules and
// limits as in the group, so bad input is answered without a round trip), sent to the group's leader over the
// link, and its responses routed back to the request handles. When the group dies, every request in flight ends
// with an error naming the model and the cause, and new ones are refused with 'shutdown' (503).
import type { IterationStats, KvCacheEvent, KvCacheStats, ModelConfig, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { RequestHandle } from '../executor/request-handle.js';
import type { ServingExecutor } from '../executor/serving-executor.js';
import { type RequestLimits, validateRequest } from '../executor/validate-request.js';
import { type Hello, type Stats, TAG } from './wire.js';

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

  constructor(private readonly model: string, hello: Hello, private readonly send: SendToGroup) {
    this.modelConfig = hello.modelConfig;
    this.limits = hello.limits;
    this.kv = hello.kv;
  }

  enqueue(request: NativeRequest): RequestHandle {
    if (this.unavailable !== undefined) throw new TrtllmError(this.unavailable, 'shutdown');
    if (this.closed) throw new TrtllmError(`model '${this.model}' is shutting down`, 'shutdown');
    const valid = validateRequest(request, this.limits);
    const id = this.nextId++;
    const handle = new RequestHandle(id, (rid) => this.cancel(rid));
    this.handles.set(id, handle);
    this.send(TAG.enqueue, { id, request: valid });
    return handle;
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
      handle.push(response);
    }
  }

  /** The group's periodic stats: iterations are kept until the next iterationStats() drains them. */
  updateStats(stats: Stats): void {
    this.kv = stats.kv;
    if (stats.iterations.length > 0) this.iterations.push(...stats.iterations);
  }

  /** The group is gone: end what is in flight, refuse what comes. */
  fail(reason: string): void {
    if (this.unavailable !== undefined) return;
    this.unavailable = reason;
    for (const [id, handle] of this.handles) {
      handle.push({ requestId: id, isFinal: true, error: { code: 'shutdown', message: reason } });
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

  /** KV cache events are not carried over the group link (wire.ts) yet: orchestrator mode serves none. */
  getLatestKvCacheEvents(): KvCacheEvent[] {
    return [];
  }

  numActiveRequests(): number {
    return this.handles.size;
  }

  /** Stops taking requests; the orchestrator drains the group itself (TAG.shutdown). */
  async shutdown(): Promise<void> {
    this.closed = true;
  }
}
