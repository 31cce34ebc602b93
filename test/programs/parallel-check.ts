// One rank of a leader-mode job, for test/parallel/leader-mode.test.ts: started as `node parallel-check.js <model>
// <tp> <pp>` alone (tp = pp = 1) or by mpirun. World rank 0 runs the scenarios through the executor and prints one
// `RESULT <json>` line; the other ranks follow its plans and exit 0 when it shuts down.
import { writeFileSync } from 'node:fs';

import type { NativeRequest, NativeResponse } from '../../worker/binding/addon-types.js';
import { loadAddon } from '../../worker/binding/load-addon.js';
import { Executor } from '../../worker/executor/executor.js';
import { initRank } from '../../worker/rank.js';
import { contextLogitsReference, generateReferences, maxRelativeError, referenceCases } from '../helpers/fixtures.js';
import { cancelAfterOneIteration, generateTogether } from '../helpers/held-loop.js';

const [modelDir = '', tpText = '1', ppText = '1', modelName = '', mode = 'scenarios'] = process.argv.slice(2);
const tp = Number(tpText);
const pp = Number(ppText);
const load = { tp, pp, numThreads: 1 };
// Pipelined pp's micro-batches (the executor's ppMicroBatches; absent: one per stage).
const ppMicroBatches = process.env.PP_MICRO_BATCHES ? Number(process.env.PP_MICRO_BATCHES) : undefined;

async function scenarios(executor: Executor): Promise<Record<string, unknown>> {
  const cases = referenceCases(modelName);
  const out: Record<string, unknown> = {};
  const reqs = cases.map((c): NativeRequest => ({
    inputTokenIds: c.input_ids, maxTokens: c.max_new_tokens,
    output: { returnContextLogits: true, excludeInputFromOutput: true },
  }));
  // One batch, so every layout batches them the same way (pipelined pp splits it into micro-batches).
  executor.iterationStats();
  const results = await generateTogether(executor, reqs);
  out.microBatchIds = [...new Set(executor.iterationStats().map((s) => s.inflightBatchingStats.microBatchId))].sort();
  out.greedy = results.map((r) => r.outputTokenIds?.[0]);
  out.greedyMatchesReference = results.map((r, i) => JSON.stringify(r.outputTokenIds?.[0]) === JSON.stringify(cases[i]!.greedy_output_ids));
  out.contextLogitsError = results.map((r, i) => maxRelativeError(r.contextLogits ?? [], contextLogitsReference(modelName, i)));

  const chunks: NativeResponse[] = [];
  for await (const r of executor.enqueue({ ...reqs[1]!, streaming: true, output: { excludeInputFromOutput: true } })) chunks.push(r);
  out.streamed = chunks.flatMap((r) => r.outputTokenIds?.[0] ?? []);
  out.streamedResponses = chunks.length;

  const greedy0 = cases[0]!.greedy_output_ids;
  const stop = await executor.generate({ inputTokenIds: cases[0]!.input_ids, maxTokens: 16, stopWords: [greedy0.slice(2, 4)], output: { excludeInputFromOutput: true } });
  out.stopWords = { tokens: stop.outputTokenIds?.[0], reason: stop.finishReasons?.[0] };

  const refs = generateReferences(modelName);
  const beam = await executor.generate({ inputTokenIds: cases[0]!.input_ids, maxTokens: 12, sampling: { beamWidth: 2, lengthPenalty: 1.0 }, numReturnSequences: 2, output: { excludeInputFromOutput: true } });
  out.beam2 = beam.outputTokenIds;
  out.beam2MatchesReference = JSON.stringify(beam.outputTokenIds) === JSON.stringify(refs.beam2?.output_ids);

  const long = Math.min(140, executor.limits.maxSeqLen - cases[0]!.input_ids.length);
  const seen = await cancelAfterOneIteration(executor, { inputTokenIds: cases[0]!.input_ids, maxTokens: long });
  out.cancelled = `${seen.at(-1)?.finishReasons?.[0]} after ${seen.flatMap((r) => r.outputTokenIds?.[0] ?? []).length} token(s)`;

  // KV pressure: four short prompts (one block each) growing to 7 blocks each in a pool of 10 — any two running
  // at once overflow it: max_utilization must pause and resume some, and the outputs must not change.
  executor.iterationStats();
  const grow = Math.min(100, executor.limits.maxSeqLen - 16);
  const pressure = cases.map((c, i) => ({ inputTokenIds: c.input_ids.slice(0, 12 + i), maxTokens: grow, output: { excludeInputFromOutput: true } }));
  out.pressure = (await generateTogether(executor, pressure)).map((r) => r.outputTokenIds?.[0]);
  out.paused = executor.iterationStats().reduce((n, s) => n + s.inflightBatchingStats.numPausedRequests, 0);
  // The KV snapshot is taken before the final responses are delivered: free by now.
  const kv = executor.kvCacheStats();
  out.kvAllFree = kv.freeNumBlocks === kv.maxNumBlocks;
  return out;
}

// `busy` mode, for the crash tests: print every rank's pid, then generate until killed.
async function busy(executor: Executor): Promise<void> {
  const prompt = referenceCases(modelName)[0]!.input_ids;
  process.stdout.write('BUSY\n');
  for (;;) await executor.generate({ inputTokenIds: prompt, maxTokens: 100 });
}

async function main(): Promise<void> {
  const info = initRank();
  process.stdout.write(`PID ${info.worldRank} ${process.pid}\n`);
  if (info.worldRank !== 0) {
    await loadAddon().runFollower(modelDir, load);
    process.stdout.write(`rank ${info.worldRank}: follower done\n`);
    return;
  }
  // A small KV pool (10 blocks of 16 tokens) under max_utilization: the 4-prompt batch must pause and resume.
  const executor = await Executor.load(modelDir, {
    ...load, tokensPerBlock: 16, maxBeamWidth: 2, maxTokensInPagedKvCache: 160, schedulerPolicy: 'max_utilization', ppMicroBatches,
  });
  let result: Record<string, unknown>;
  try {
    if (mode === 'busy') await busy(executor);
    result = await scenarios(executor);
  } finally {
    await executor.shutdown();
  }
  // A file, not stdout: mpirun interleaves the ranks' output, and the other ranks' lines can land inside a long one.
  const line = `RESULT ${JSON.stringify({ worldSize: info.worldSize, ...result })}\n`;
  if (process.env.RESULT_FILE) writeFileSync(process.env.RESULT_FILE, line);
  else process.stdout.write(line);
}

await main();
