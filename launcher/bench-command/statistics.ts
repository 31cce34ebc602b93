// Summary statistics of latency samples (pure). Percentiles interpolate linearly between the two nearest ranks,
// as numpy.percentile does by default, so figures compare with Triton's and vLLM's Python benchmarks.

export function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

/** The p-th percentile (p in [0, 100]); 0 for no samples, so an empty run prints zeros rather than NaN. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export interface Spread { mean: number; median: number; p99: number }

export function spread(values: readonly number[]): Spread {
  return { mean: mean(values), median: median(values), p99: percentile(values, 99) };
}
