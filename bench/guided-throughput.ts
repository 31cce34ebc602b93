// What guided decoding costs a batch, with the token work held equal: N requests whose outputs are all constrained
// to a JSON Schema, then the same prompts unconstrained with each output's length set to what its guided run
// produced (max_tokens = that length, no end token), so both runs compute the same tokens in the same order and
// only the grammar differs. Guided outputs end where the schema does, usually well before max_tokens, so comparing
// against unconstrained requests of the full length (bench --offline) would also count the extra prefills. Each
// round runs both; printed: output tokens/s of each, their ratio, the mean time of a decode-only iteration, and
// the guided outputs checked against the schema. All requests are submitted at once (offline). Round 1 meets the
// guide's positions for the first time; the warm-up before it runs the prompts unconstrained (every batch size met).
//   node dist/bench/guided-throughput.js --model DIR --schema FILE [--vocab FILE] [--device cuda] [--load-format dummy]
//     [--requests 640] [--prompt 128] [--max-tokens 128] [--max-batch 64] [--rounds 2] [--threads N]
import { readFileSync } from 'node:fs';

import { Command } from 'commander';

import { guidedOutputCheck } from '../launcher/bench-command/guided-outputs.js';
import { readGuidedVocab } from '../launcher/bench-command/targets.js';
import type { IterationStats } from '../worker/binding/addon-types.js';
import { Executor } from '../worker/executor/executor.js';
import { guidedVocabulary } from '../worker/token-bytes.js';

interface Options {
  model: string; schema: string; vocab?: string; device: 'cpu' | 'cuda' | 'auto'; loadFormat: 'auto' | 'dummy';
  requests: string; prompt: string; maxTokens: string; maxBatch: string; rounds: string; threads?: string;
}

interface RunResult { seconds: number; tokens: number; lengths: number[]; outputs: number[][]; decodeStepMs: number; decodeSteps: number }

async function run(executor: Executor, prompts: number[][], lengths: number[] | undefined, maxTokens: number, schema: string): Promise<RunResult> {
  const stats: IterationStats[] = [];
  executor.iterationStats();
  const drain = setInterval(() => stats.push(...executor.iterationStats()), 50);
  const t0 = performance.now();
  const outputs = await Promise.all(prompts.map(async (inputTokenIds, i) => {
    const r = await executor.generate({
      inputTokenIds, endId: -1, output: { excludeInputFromOutput: true },
      ...(lengths === undefined
        ? { maxTokens, guidedDecoding: { guideType: 'json_schema' as const, guide: schema } }
        : { maxTokens: lengths[i]! }),
    });
    return r.outputTokenIds?.[0] ?? [];
  }));
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(drain);
  stats.push(...executor.iterationStats());
  const decode = stats.filter((s) => s.inflightBatchingStats.numContextRequests === 0 && s.inflightBatchingStats.numGenRequests > 0);
  const decodeMs = decode.reduce((a, s) => a + s.iterLatencyMs, 0);
  const got = outputs.map((o) => o.length);
  return { seconds, tokens: got.reduce((a, b) => a + b, 0), lengths: got, outputs, decodeStepMs: decode.length > 0 ? decodeMs / decode.length : 0, decodeSteps: decode.length };
}

async function main(): Promise<void> {
  const o = new Command()
    .requiredOption('--model <dir>', 'checkpoint directory (config.json alone with --load-format dummy)')
    .requiredOption('--schema <file>', 'the JSON Schema every guided request follows')
    .option('--vocab <file>', 'token bytes (bench/grammar-mask.js --write-vocab); default: the model\'s tokenizer')
    .option('--device <d>', 'cpu | cuda | auto', 'auto')
    .option('--load-format <f>', 'auto | dummy', 'auto')
    .option('--requests <n>', 'requests per run', '640')
    .option('--prompt <n>', 'prompt tokens', '128')
    .option('--max-tokens <n>', 'max_tokens of a guided request', '128')
    .option('--max-batch <n>', 'the executor\'s max batch size', '64')
    .option('--rounds <n>', 'guided + equal-length unconstrained runs', '2')
    .option('--threads <n>', 'the executor\'s threads (--threads; default all cores): its host work beside a GPU')
    .parse(process.argv)
    .opts<Options>();
  const schema = readFileSync(o.schema, 'utf8');
  const fileVocab = o.vocab === undefined ? undefined : readGuidedVocab(o.vocab);
  const executor = await Executor.load(o.model, {
    device: o.device, loadFormat: o.loadFormat, maxBatchSize: Number(o.maxBatch),
    ...(o.threads === undefined ? {} : { numThreads: Number(o.threads) }),
    ...(fileVocab === undefined ? {} : { guidedDecoding: fileVocab }),
  });
  const V = executor.modelConfig.vocabSize;
  const vocab = fileVocab ?? guidedVocabulary(o.model, V);
  if (vocab === undefined) throw new Error(`--model ${o.model}: its tokenizer gives no token bytes; pass --vocab`);
  const n = Number(o.requests), promptLen = Number(o.prompt), maxTokens = Number(o.maxTokens);
  // Seeded prompts of ids the vocabulary spells (any id works for dummy weights; keep clear of special ids).
  let state = 2463534242;
  const next = (): number => { state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0; return state; };
  const prompts = Array.from({ length: n }, () => Array.from({ length: promptLen }, () => 1 + (next() % Math.min(V - 1, vocab.tokenOffsets.length - 2))));
  console.log(`model ${o.model} (${o.loadFormat} weights, ${o.device}), ${n} requests x ${promptLen} prompt tokens, guided max_tokens ${maxTokens}, max batch ${o.maxBatch}, schema ${o.schema}`);
  try {
    await run(executor, prompts.slice(0, 8), undefined, maxTokens, schema);  // warm-up: the grammar compiled, kernels chosen
    // Warm-up: every prompt unconstrained, of lengths 1 .. max_tokens, so that the executor has met the decode batch
    // sizes (a CUDA model captures a graph for each on first use) before round 1; otherwise round 1's guided run,
    // which goes first, would pay for them and its unconstrained run after it would not.
    await run(executor, prompts, prompts.map(() => 1 + (next() % maxTokens)), maxTokens, schema);
    const rows: string[] = [];
    for (let round = 1; round <= Number(o.rounds); round += 1) {
      const g = await run(executor, prompts, undefined, maxTokens, schema);
      const check = await guidedOutputCheck(schema, vocab);
      for (const out of g.outputs) check.add(out);
      const p = await run(executor, prompts, g.lengths, maxTokens, schema);
      const exact = p.lengths.every((l, i) => l === g.lengths[i]);
      const ratio = (g.tokens / g.seconds) / (p.tokens / p.seconds);
      rows.push(`| ${round} | ${(g.tokens / n).toFixed(1)} | ${(p.tokens / p.seconds).toFixed(0)} | ${(g.tokens / g.seconds).toFixed(0)} | **${(100 * ratio).toFixed(1)}%** | ` +
        `${p.decodeStepMs.toFixed(2)} (${p.decodeSteps}) | ${g.decodeStepMs.toFixed(2)} (${g.decodeSteps}) |`);
      console.log(check.summary().replace('[INFO] ', `round ${round}: `) + (exact ? '' : '; NOTE: some unconstrained lengths differ from the guided ones'));
    }
    console.log('\n| round | tokens a request | unconstrained, equal lengths (tok/s) | every request guided (tok/s) | guided / unconstrained | decode iteration, unconstrained (ms, count) | decode iteration, guided (ms, count) |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(r);
  } finally {
    await executor.shutdown();
  }
}

await main();
