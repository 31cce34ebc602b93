// What the frontend needs from an executor: the in-process one (executor.ts) and, in orchestrator mode, the proxy
// for a worker group's executor (orchestrator/remote-executor.ts) both provide it.
import type { IterationStats, KvCacheEvent, KvCacheStats, ModelConfig, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import type { RequestHandle } from './request-handle.js';
import type { RequestLimits } from './validate-request.js';

export interface ServingExecutor {
  readonly modelConfig: ModelConfig;
  readonly limits: RequestLimits;
  /** Validates and enqueues; throws TrtllmError (invalid_argument, queue_full, shutdown). */
  enqueue(request: NativeRequest): RequestHandle;
  generate(request: NativeRequest): Promise<NativeResponse>;
  cancel(requestId: number): void;
  iterationStats(): IterationStats[];
  onIterationStats(listener: (batch: IterationStats[]) => void): () => void;
  kvCacheStats(): KvCacheStats;
  /** Drains the KV cache events recorded since the last call (--kv-cache-event-buffer-max-size); [] when off. A
   * worker group's proxy answers once it has asked the group (a promise). */
  getLatestKvCacheEvents(): KvCacheEvent[] | Promise<KvCacheEvent[]>;
  numActiveRequests(): number;
  shutdown(): Promise<void>;
}
