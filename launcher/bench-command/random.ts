// Seeded randomness for the bench (pure): the same --seed gives the same prompts, lengths and arrival times,
// so two runs (or two builds) are measured on identical traffic.

/** mulberry32: small, fast and good enough for workload generation; uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A normal sample (Box-Muller); stdev 0 gives the mean exactly, as benchmark_core_model's constant lengths. */
export function normal(random: () => number, mean: number, stdev: number): number {
  if (stdev === 0) return mean;
  const u = 1 - random();   // (0, 1]: log(0) must not happen
  const v = random();
  return mean + stdev * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** An exponential sample with the given rate (mean 1 / rate): Poisson arrivals. */
export function exponential(random: () => number, rate: number): number {
  return -Math.log(1 - random()) / rate;
}
