// --check-perf-json: fails a run whose figures regressed past a tolerance (pure). The file holds baselines
// keyed by the --json summary's names; throughputs (*_per_sec) must not fall below baseline × (1 − tolerance),
// latencies (*_ms) and failed_requests must not rise above baseline × (1 + tolerance).
//   {"tolerance": 0.1, "requests_per_sec": 20, "p99_latency_ms": {"value": 900, "tolerance": 0.25}}
import { ToolError } from '../client/tool-error.js';
import type { BenchSummary } from './summary.js';

export interface PerfCheck {
  metric: string;
  baseline: number;
  actual: number;
  limit: number;
  ok: boolean;
}

function direction(metric: string): 'higher' | 'lower' | undefined {
  if (metric.endsWith('_per_sec')) return 'higher';
  if (metric.endsWith('_ms') || metric === 'failed_requests') return 'lower';
  return undefined;
}

export function checkPerf(summary: BenchSummary, spec: unknown, file: string, defaultTolerance: number): PerfCheck[] {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) throw new ToolError(`--check-perf-json ${file} must hold a JSON object of baselines`);
  const entries = Object.entries(spec as Record<string, unknown>);
  const fileTolerance = (spec as { tolerance?: unknown }).tolerance;
  if (fileTolerance !== undefined && (typeof fileTolerance !== 'number' || fileTolerance < 0)) {
    throw new ToolError(`--check-perf-json ${file}: tolerance must be a number >= 0, got ${JSON.stringify(fileTolerance)}`);
  }
  const checks: PerfCheck[] = [];
  for (const [metric, value] of entries) {
    if (metric === 'tolerance') continue;
    const dir = direction(metric);
    const actual = (summary as unknown as Record<string, unknown>)[metric];
    if (dir === undefined || typeof actual !== 'number') {
      throw new ToolError(`--check-perf-json ${file}: "${metric}" is not a checkable figure; use a *_per_sec, *_ms or failed_requests name of the --json summary`);
    }
    const { baseline, tolerance } = typeof value === 'number' ? { baseline: value, tolerance: undefined }
      : { baseline: (value as { value?: unknown })?.value, tolerance: (value as { tolerance?: unknown })?.tolerance };
    if (typeof baseline !== 'number' || (tolerance !== undefined && (typeof tolerance !== 'number' || tolerance < 0))) {
      throw new ToolError(`--check-perf-json ${file}: "${metric}" must be a number or {"value": n, "tolerance": t}, got ${JSON.stringify(value)}`);
    }
    const tol = (tolerance as number | undefined) ?? (fileTolerance as number | undefined) ?? defaultTolerance;
    const limit = dir === 'higher' ? baseline * (1 - tol) : baseline * (1 + tol);
    checks.push({ metric, baseline, actual, limit, ok: dir === 'higher' ? actual >= limit : actual <= limit });
  }
  return checks;
}

export function formatChecks(checks: PerfCheck[]): string[] {
  return checks.map((c) => `[${c.ok ? 'PASS' : 'FAIL'}] ${c.metric}: ${c.actual.toFixed(2)} (baseline ${c.baseline}, limit ${c.limit.toFixed(2)})`);
}
