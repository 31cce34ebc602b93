// One rank of the leader-mode benchmark (bench/parallel-throughput.ts): `node parallel-rank.js <model> <tp> <pp>
// <threads> <prompt> <gen> <batches> [<pp micro-batches> <max batch size> <pp layers> <vary> <chunked max tokens>]`. World rank 0 times decode and prefill through the executor and prints one
// `RESULT <json>` line; every rank prints its peak memory as `MEM <rank> <bytes>` when it is done.
import { resourceUsage } from 'node:process';

import { loadAddon } from '../../worker/binding/load-addon.js';
import { Executor } from '../../worker/executor/executor.js';
import { initRank } from '../../worker/rank.js';

const [model = '', tp = '1', pp = '1', threads = '1', prompt = '128', gen = '64', batches = '1,8', microBatches = '0', maxBatch = '64', ppLayers = '', vary = '', chunked = ''] = process.argv.slice(2);
const load = { tp: Number(tp), pp: Number(pp), numThreads: Number(threads), ...(ppLayers ? { ppLayers } : {}) };

async function leader(): Promise<Record<string, unknown>> {
  const executor = await Executor.load(model, {
    ...load, maxBatchSize: Number(maxBatch), tokensPerBlock: 64, ppMicroBatches: Number(microBatches),
    // 'chunked' n: prompts in chunks of an iteration budget of n tokens, next to the decodes
    ...(chunked ? { enableChunkedContext: true, maxNumTokens: Number(chunked) } : {}),
  });
  const rows: Record<string, unknown>[] = [];
  try {
    await executor.generate({ inputTokenIds: [5, 6, 7, 8], maxTokens: 4 });
    for (const batch of batches.split(',').map(Number)) {
      executor.iterationStats();
      const t0 = performance.now();
      await Promise.all(Array.from({ length: batch }, (_, b) => executor.generate({
        inputTokenIds: Array.from({ length: Number(prompt) }, (_, i) => 3 + ((i * 31 + b * 7) % 1000)),
        // 'vary': outputs of gen/2 .. 3gen/2 tokens by request (the same in every layout), so requests do not all
        // end in the same iteration as they do at a fixed length.
        maxTokens: vary === 'vary' ? Math.round(Number(gen) * (0.5 + (b % 9) / 8)) : Number(gen),
      })));
      const wallSeconds = (performance.now() - t0) / 1000;
      const stats = executor.iterationStats();
      const decode = stats.filter((s) => s.inflightBatchingStats.numContextRequests === 0 && s.inflightBatchingStats.numGenRequests > 0);
      const prefill = stats.filter((s) => s.inflightBatchingStats.numContextRequests > 0 && s.inflightBatchingStats.numGenRequests === 0);
      const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
      // Pipelined pp overlaps iterations, so per-iteration latencies no longer add up to the time taken: the
      // offline figure is the batch's output tokens over its wall time (prefill included).
      rows.push({
        batch,
        outputTokensPerSecond: (batch * Number(gen)) / wallSeconds,
        microBatches: new Set(stats.map((s) => s.inflightBatchingStats.microBatchId)).size,
        prefillTokensPerSecond: sum(prefill.map((s) => s.inflightBatchingStats.numCtxTokens)) / (sum(prefill.map((s) => s.iterLatencyMs)) / 1000),
        decodeStepMs: sum(decode.map((s) => s.iterLatencyMs)) / decode.length,
        decodeTokensPerSecond: sum(decode.map((s) => s.inflightBatchingStats.numGenRequests)) / (sum(decode.map((s) => s.iterLatencyMs)) / 1000),
        commMsPerDecodeStep: (1000 * sum(decode.map((s) => s.commSeconds))) / decode.length,
        planBytesPerDecodeStep: sum(decode.map((s) => s.planBytes)) / decode.length,
        weightBytesLeader: stats[0]?.cpuMemUsage,
      });
    }
  } finally {
    await executor.shutdown();
  }
  return { rows };
}

const info = initRank();
if (info.worldRank === 0) {
  const result = await leader();
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
} else {
  await loadAddon().runFollower(model, load);
}
process.stdout.write(`MEM ${info.worldRank} ${resourceUsage().maxRSS * 1024}\n`);
