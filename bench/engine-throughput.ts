// Prefill and decode throughput of the CPU executor at batch 1, 8 and 32 on a ~22M-parameter Llama with dummy
// weights. Baseline measured in the same run: the memory-bandwidth roofline for decode (every decode step must
// read all weights once; weight bytes / measured copy bandwidth = the fastest possible step).
//   node dist/bench/engine-throughput.js [--threads N] [--batches 1,8,32] [--prompt 128] [--gen 64]
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';

import { packageRoot } from '../worker/common/package-root.js';
import { Executor } from '../worker/executor/executor.js';
import { BENCH_SHAPE, parameterCount, writeDummyLlama } from './dummy-checkpoint.js';
import { memoryBandwidth } from './memory-bandwidth.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

async function main(): Promise<void> {
  const threads = Number(arg('--threads', String(cpus().length)));
  const batches = arg('--batches', '1,8,32').split(',').map(Number);
  const promptLen = Number(arg('--prompt', '128'));
  const genLen = Number(arg('--gen', '64'));
  const dir = writeDummyLlama(join(packageRoot(), 'build', 'bench-models', 'llama-22m'), BENCH_SHAPE);
  const params = parameterCount(BENCH_SHAPE);
  console.log(`model: Llama shape ${JSON.stringify(BENCH_SHAPE)} = ${(params / 1e6).toFixed(1)}M parameters (fp32, dummy weights)`);
  console.log(`machine: ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; threads ${threads}`);
  const bandwidth = await memoryBandwidth(threads);
  const weightBytes = params * 4;
  const rooflineStepMs = (weightBytes / bandwidth) * 1000;
  console.log(`baseline: ${threads}-thread copy bandwidth ${(bandwidth / 1e9).toFixed(1)} GB/s -> decode roofline ${rooflineStepMs.toFixed(2)} ms/step`);

  const executor = await Executor.load(dir, { numThreads: threads, maxBatchSize: 64, maxNumTokens: 8192, tokensPerBlock: 64 });
  const rows: string[] = [];
  try {
    // Warm-up.
    await executor.generate({ inputTokenIds: Array.from({ length: 32 }, (_, i) => 3 + i), maxTokens: 4 });
    for (const batch of batches) {
      executor.iterationStats();
      const requests = Array.from({ length: batch }, (_, b) => ({
        inputTokenIds: Array.from({ length: promptLen }, (_, i) => 3 + ((i * 31 + b * 7) % (BENCH_SHAPE.vocabSize - 3))),
        maxTokens: genLen,
      }));
      process.stderr.write(`batch ${batch}: running ${batch} x (${promptLen} prompt + ${genLen} generated) ...\n`);
      await Promise.all(requests.map((r) => executor.generate(r)));
      const stats = executor.iterationStats();
      const prefill = stats.filter((s) => s.inflightBatchingStats.numContextRequests > 0 && s.inflightBatchingStats.numGenRequests === 0);
      const decode = stats.filter((s) => s.inflightBatchingStats.numContextRequests === 0 && s.inflightBatchingStats.numGenRequests > 0);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      const prefillTps = sum(prefill.map((s) => s.inflightBatchingStats.numCtxTokens)) / (sum(prefill.map((s) => s.iterLatencyMs)) / 1000);
      const decodeTokens = sum(decode.map((s) => s.inflightBatchingStats.numGenRequests));
      const decodeMs = sum(decode.map((s) => s.iterLatencyMs));
      const stepMs = decodeMs / decode.length;
      rows.push(`| ${batch} | ${prefillTps.toFixed(0)} | ${(decodeTokens / (decodeMs / 1000)).toFixed(0)} | ${stepMs.toFixed(2)} | ${(rooflineStepMs / stepMs).toFixed(2)} |`);
    }
  } finally {
    await executor.shutdown();
  }
  console.log('\n| batch | prefill tokens/s | decode tokens/s | decode step (ms) | roofline step / measured step |');
  console.log('|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await main();
