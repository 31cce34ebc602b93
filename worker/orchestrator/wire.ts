// What the orchestrator and a worker group's leader say to each other over their link (comm-link.h): a tag per
// kind of message and a JSON body, with Float32Arrays (logits, LoRA weights) and Int32Arrays (LoRA configs) carried
// as base64 of their bytes rather than as number lists. Pure.
import type { IterationStats, KvCacheEvent, KvCacheStats, ModelConfig, NativeErrorCode, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import type { RequestLimits } from '../executor/validate-request.js';

export const TAG = {
  hello: 1,        // group → orchestrator: loaded, warmed up, ready (or loadFailed)
  loadFailed: 2,   // group → orchestrator: the model could not be loaded
  enqueue: 3,      // orchestrator → group
  cancel: 4,       // orchestrator → group
  responses: 5,    // group → orchestrator: one iteration's responses
  stats: 6,        // group → orchestrator: iteration stats and KV state, every STATS_INTERVAL_MS
  shutdown: 7,     // orchestrator → group: drain, then stop
  bye: 8,          // group → orchestrator: stopped; the link may be disconnected
  heartbeat: 9,    // orchestrator → group: still here
  members: 10,     // group → orchestrator: its processes (host, pid), sent before loading so they are watched early
  kvEventsAsk: 11, // orchestrator → group: drain your KV cache events (POST /kv_cache_events)
  kvEvents: 12,    // group → orchestrator: the events drained, answering the ask with the same id
} as const;
export type Tag = (typeof TAG)[keyof typeof TAG];

export const STATS_INTERVAL_MS = 500;
export const HEARTBEAT_INTERVAL_MS = 1000;
/** How long /kv_cache_events waits for a group's answer: a live leader answers within one turn of its event loop,
 * and a stuck one must not hang the endpoint. A later answer is kept for the next drain (remote-executor.ts). */
export const KV_EVENTS_REPLY_MS = 2000;

export interface RankIdentity { host: string; pid: number }

export interface Hello {
  modelConfig: ModelConfig;
  limits: RequestLimits;
  ranks: RankIdentity[];
  kv: KvCacheStats;
  loadSeconds: number;
}
export interface LoadFailed { code: NativeErrorCode; message: string; ranks: RankIdentity[] }
export interface Enqueue { id: number; request: NativeRequest }
export interface Cancel { id: number }
export interface KvEventsAsk { id: number }
export interface KvEvents { id: number; events: KvCacheEvent[] }
export interface Stats { iterations: IterationStats[]; kv: KvCacheStats; active: number }
/** `cutMessage`: the error of a request still running at the drain deadline (the orchestrator's drain-state.ts). */
export interface Shutdown { drainMs: number; cutMessage?: string }

const F32 = '$f32';
const I32 = '$i32';  // a request's lora_config (LoraRequest.config)

const base64Of = (v: Float32Array | Int32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');

export function encode(value: unknown): Uint8Array {
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Float32Array) return { [F32]: base64Of(v) };
    if (v instanceof Int32Array) return { [I32]: base64Of(v) };
    return v;
  });
  return Buffer.from(text, 'utf8');
}

/** A typed array of its own (aligned) memory from base64 text. */
function typedFrom<T extends Float32Array | Int32Array>(text: string, make: (n: number) => T): T {
  const raw = Buffer.from(text, 'base64');
  const out = make(raw.byteLength / 4);
  new Uint8Array(out.buffer).set(raw);
  return out;
}

export function decode<T>(bytes: Uint8Array): T {
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'), (_key, v: unknown) => {
    if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o[F32] === 'string') return typedFrom(o[F32], (n) => new Float32Array(n));
      if (typeof o[I32] === 'string') return typedFrom(o[I32], (n) => new Int32Array(n));
    }
    return v;
  }) as T;
}

/** Responses travel with the orchestrator's request id in place of the group's own. */
export function withRequestId(response: NativeResponse, requestId: number): NativeResponse {
  return { ...response, requestId };
}
