// Summary statistics of latency samples (pure): the one definition for `trtllm-launch bench` and every script in
// bench/, so a p50 means the same in each. Percentiles interpolate linearly between the two nearest ranks, as
// numpy.percentile does by default (method 'linear': rank p/100 × (n − 1) into the sorted samples), so figures
// compare with Triton's and vLLM's Python benchmarks; the median is the 50th percentile (the mean of the two middle
// samples when n is even).

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
