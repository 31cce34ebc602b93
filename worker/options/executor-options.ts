// The executor's settings among a rank's ServeOptions, as the option table binds them (pure): what the leader (or a
// worker group's leader) loads its executor with, and the part a follower loads its shard with.
import type { NativeLoadOptions } from '../binding/addon-types.js';
import type { ExecutorOptions } from '../executor/executor.js';
import type { ExecutorBinding } from './option-definition.js';
import { SERVE_OPTIONS } from './serve-option-table.js';
import type { ServeOptions } from './serve-options.js';

// Iteration stats the native ring keeps between two polls of the frontend's metrics (worker/serve.ts polls often).
const ITER_STATS_KEPT = 10_000;

const BOUND: readonly { from: keyof ServeOptions; binding: ExecutorBinding }[] = SERVE_OPTIONS
  .filter((d) => d.executor !== undefined)
  .map((d) => ({ from: d.executor!.from ?? (d.name as keyof ServeOptions), binding: d.executor! }));

function pick(serve: Readonly<ServeOptions>, followerOnly: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { from, binding } of BOUND) {
    if (followerOnly && !binding.follower) continue;
    const value = serve[from];
    if (value !== undefined) out[binding.field] = value;
  }
  return out;
}

/** The executor's settings (also what a worker group of the orchestrator loads with). */
export function executorOptions(serve: Readonly<ServeOptions>): ExecutorOptions {
  return { ...pick(serve, false), iterStatsMaxIterations: ITER_STATS_KEPT };
}

/** A follower's load options: its grid, device, threads, and the limits that size its buffers. */
export function followerOptions(serve: Readonly<ServeOptions>): NativeLoadOptions {
  return pick(serve, true) as NativeLoadOptions;
}
