// The decode roofline's denominator: how fast this machine moves memory with all cores at once. Each worker
// thread copies its own 128 MiB buffer (memcpy underneath, read + write counted) after a shared start signal;
// aggregate bandwidth = all bytes / the slowest worker's time, best of several rounds.
import { Worker } from 'node:worker_threads';

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const size = workerData.size;
const src = Buffer.alloc(size, 1), dst = Buffer.alloc(size);
const flag = new Int32Array(workerData.flag);
src.copy(dst);
parentPort.postMessage('ready');
Atomics.wait(flag, 0, 0);
const t0 = performance.now();
for (let i = 0; i < workerData.rounds; i++) src.copy(dst);
parentPort.postMessage((performance.now() - t0) / 1000);
`;

async function round(threads: number, size: number, rounds: number): Promise<number> {
  const flag = new SharedArrayBuffer(4);
  const workers = Array.from({ length: threads }, () => new Worker(WORKER_SOURCE, { eval: true, workerData: { size, rounds, flag } }));
  const ready = workers.map((w) => new Promise<void>((resolve) => w.once('message', () => resolve())));
  await Promise.all(ready);
  const done = workers.map((w) => new Promise<number>((resolve) => w.once('message', (s: number) => resolve(s))));
  Atomics.store(new Int32Array(flag), 0, 1);
  Atomics.notify(new Int32Array(flag), 0);
  const seconds = await Promise.all(done);
  await Promise.all(workers.map((w) => w.terminate()));
  return (threads * rounds * size * 2) / Math.max(...seconds);
}

/** Bytes per second moved by `threads` cores copying at once (best of 3 rounds). */
export async function memoryBandwidth(threads: number): Promise<number> {
  let best = 0;
  for (let i = 0; i < 3; i += 1) best = Math.max(best, await round(threads, 128 * 1024 * 1024, 4));
  return best;
}
