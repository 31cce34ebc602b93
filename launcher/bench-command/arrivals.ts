// When each benchmark request is sent (pure): offsets in ms from the start. Exponential gaps are Poisson
// arrivals at --request-rate (benchmark_core_model's default), constant gaps are exactly 1 / rate, and no rate
// sends everything at once (then --concurrency alone paces the run).
import { exponential } from './random.js';

export type ArrivalKind = 'exponential' | 'constant';

export function arrivalOffsetsMs(count: number, rate: number | undefined, kind: ArrivalKind, random: () => number): number[] {
  const offsets: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i += 1) {
    offsets.push(t);
    if (rate !== undefined) t += 1000 * (kind === 'constant' ? 1 / rate : exponential(random, rate));
  }
  return offsets;
}
