// Speculative decoding by prompt lookup (--speculative-ngram) at batch 1, against the same requests without it in
// the same run: output tokens per second, the tokens a pass gained on average, and whether every output equals the
// plain one. Two prompt sets from the bundled model's held-out Brown text: "copy" — a passage, a newline, then the
// passage's first words again (text that quotes or edits its input, as the copy-heavy set) — and "plain",
// a sentence to continue. Greedy, max_tokens 64, one request at a time.
//   node dist/bench/speculative-ngram.js [--model DIR] [--drafts 2,4,8] [--threads N] [--prompts 8]
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

import { Command } from 'commander';

import { defaultModelDir } from '../worker/common/package-root.js';
import { Executor } from '../worker/executor/executor.js';
import { loadTokenizer } from '../worker/tokenizer.js';

interface Options { model: string; drafts: string; threads: string; prompts: string; maxTokens: string }

interface SetResult { seconds: number; tokens: number; outputs: number[][]; perPass: number }

async function runSet(executor: Executor, prompts: number[][], maxTokens: number): Promise<SetResult> {
  executor.iterationStats();
  const t0 = performance.now();
  const outputs: number[][] = [];
  for (const inputTokenIds of prompts) {
    const r = await executor.generate({ inputTokenIds, maxTokens, output: { excludeInputFromOutput: true } });
    outputs.push(r.outputTokenIds?.[0] ?? []);
  }
  const seconds = (performance.now() - t0) / 1000;
  const decode = executor.iterationStats().filter((s) => s.inflightBatchingStats.numGenRequests > 0);
  const perPass = decode.reduce((a, s) => a + s.inflightBatchingStats.avgNumDecodedTokensPerIter, 0) / Math.max(1, decode.length);
  return { seconds, tokens: outputs.reduce((n, o) => n + o.length, 0), outputs, perPass };
}

async function main(): Promise<void> {
  const o = new Command()
    .option('--model <dir>', 'checkpoint', defaultModelDir())
    .option('--drafts <list>', 'guessed tokens per pass to try', '2,4,8')
    .option('--threads <n>', 'CPU threads', String(Math.min(4, cpus().length)))
    .option('--prompts <n>', 'prompts per set', '8')
    .option('--max-tokens <n>', 'tokens per output', '64')
    .parse(process.argv).opts<Options>();
  const tokenizer = loadTokenizer(o.model);
  const text = (JSON.parse(readFileSync(join(defaultModelDir(), 'heldout_sample.json'), 'utf8')) as { text: string }).text;
  const sentences = text.split(/(?<=[.!?])\s+/).filter((s) => s.split(' ').length >= 8);
  const n = Number(o.prompts);
  const copy = sentences.slice(0, n).map((s) => tokenizer.encode(`${s}\n${s.split(' ').slice(0, 4).join(' ')}`));
  const plain = sentences.slice(n, 2 * n).map((s) => tokenizer.encode(s.split(' ').slice(0, 8).join(' ')));
  const maxTokens = Number(o.maxTokens);
  console.log(`model ${o.model}, ${o.threads} threads (${cpus()[0]?.model ?? 'cpu'}), ${n} prompts a set, ${maxTokens} tokens each, greedy, batch 1`);
  const rows: string[] = [];
  let base: Record<string, SetResult> = {};
  for (const drafts of [0, ...o.drafts.split(',').map(Number)]) {
    const executor = await Executor.load(o.model, { numThreads: Number(o.threads), ngramDraftTokens: drafts });
    try {
      await runSet(executor, [copy[0]!], 8);  // warm-up
      for (const [name, prompts] of [['copy', copy], ['plain', plain]] as const) {
        const r = await runSet(executor, prompts, maxTokens);
        if (drafts === 0) base = { ...base, [name]: r };
        const b = base[name]!;
        const equal = JSON.stringify(r.outputs) === JSON.stringify(b.outputs);
        rows.push(`| ${name} | ${drafts} | ${(r.tokens / r.seconds).toFixed(0)} | ${r.perPass.toFixed(2)} | **${((b.seconds / r.seconds)).toFixed(2)}×** | ${equal ? 'yes' : 'NO'} |`);
      }
    } finally {
      await executor.shutdown();
    }
  }
  console.log('\n| prompts | guessed tokens per pass (--speculative-ngram) | output tok/s | tokens gained per pass | speedup vs 0 | outputs equal to 0 |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await main();
