// Speculative decoding at batch 1 — by prompt lookup (--speculative-ngram) and, when given, by a draft model
// (--draft-model, or --layer-draft N: the model's own first N layers as its draft) or by Medusa heads (--medusa
// <blocks>: the trained blocks scripts/train/train_medusa_heads.py writes, with the model's LM head as each head's
// projection; as the chain of first choices and as trees of --medusa-tokens candidates) — against the same requests
// without it in the same run: output tokens per second, the tokens a pass gained on average, and whether every
// output equals the plain one. Two prompt sets from the bundled model's held-out Brown text: "copy" — a passage, a
// newline, then the passage's first words again (text that quotes or edits its input, as the issue's copy-heavy
// set) — and "plain", a sentence to continue. Greedy (--sampled: temperature 0.8, top-p 0.95, a seed per prompt),
// max_tokens 64, one request at a time. Where an output differs
// from the plain one, its first differing token is shown with the plain run's top-2 logit margin there: on a GPU
// the check pass computes rows with other kernels than a one-token step (a near tie may flip either way, as
// batching does), so a difference is explained only where that margin is small.
//   node dist/bench/speculative-ngram.js [--model DIR] [--drafts 2,4,8] [--threads N] [--prompts 8] [--device cuda]
//        [--draft-model DIR | --layer-draft N] [--draft-tokens 2,4] [--medusa FILE] [--medusa-tokens 8,16] [--sampled]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

import { Command } from 'commander';

import { defaultModelDir } from '../worker/common/package-root.js';
import { Executor } from '../worker/executor/executor.js';
import { loadTokenizer } from '../worker/tokenizer.js';
import { writeLayerDraft } from '../test/helpers/layer-draft.js';
import { writeMedusaHeads } from '../test/helpers/medusa-heads.js';

interface Options {
  model: string; drafts: string; threads: string; prompts: string; maxTokens: string; device: 'cpu' | 'cuda';
  draftModel?: string; layerDraft?: string; draftTokens: string; sampled?: boolean; medusa?: string; medusaTokens: string;
}

/** One configuration of the table: its label and the executor options that make it. */
interface Drafter {
  label: string;
  options: { ngramDraftTokens?: number; draftModel?: string; draftModelTokens?: number; medusaHeads?: string; medusaChoices?: string };
}

interface SetResult { seconds: number; tokens: number; outputs: number[][]; perPass: number }

async function runSet(executor: Executor, prompts: number[][], maxTokens: number, sampled = false): Promise<SetResult> {
  executor.iterationStats();
  const t0 = performance.now();
  const outputs: number[][] = [];
  for (const [i, inputTokenIds] of prompts.entries()) {
    const sampling = sampled ? { temperature: 0.8, topP: 0.95, seed: 1000 + i } : undefined;
    const r = await executor.generate({ inputTokenIds, maxTokens, output: { excludeInputFromOutput: true }, ...(sampling ? { sampling } : {}) });
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
    .option('--device <device>', 'cpu | cuda', 'cpu')
    .option('--draft-model <dir>', 'a draft model to try as well')
    .option('--layer-draft <n>', 'the model\'s own first n layers as a draft model to try as well')
    .option('--draft-tokens <list>', 'guesses per step to try with the draft model', '2,4')
    .option('--sampled', 'temperature 0.8, top-p 0.95, a seed per prompt, instead of greedy')
    .option('--medusa <file>', 'trained Medusa blocks (scripts/train/train_medusa_heads.py) to try as well')
    .option('--medusa-tokens <list>', 'tree sizes (candidates per step) to try with the Medusa heads', '8,16')
    .parse(process.argv).opts<Options>();
  let draftDir = o.draftModel;
  if (o.layerDraft !== undefined) {
    draftDir = writeLayerDraft(o.model, mkdtempSync(join(tmpdir(), 'layer-draft-')), Number(o.layerDraft));
    process.on('exit', () => rmSync(draftDir!, { recursive: true, force: true }));
  }
  let medusaDir: string | undefined, medusaHeads = 0;
  if (o.medusa !== undefined) {
    medusaHeads = (JSON.parse(readFileSync(o.medusa.replace(/\.safetensors$/, '.json'), 'utf8')) as { medusa_num_heads: number }).medusa_num_heads;
    medusaDir = writeMedusaHeads(o.model, mkdtempSync(join(tmpdir(), 'medusa-')), medusaHeads, o.medusa);
    process.on('exit', () => rmSync(medusaDir!, { recursive: true, force: true }));
  }
  const chain = JSON.stringify(Array.from({ length: medusaHeads }, (_, d) => new Array<number>(d + 1).fill(0)));
  const drafters: Drafter[] = [
    { label: 'none', options: {} },
    ...o.drafts.split(',').map((k) => ({ label: `prompt lookup, ${k}`, options: { ngramDraftTokens: Number(k) } })),
    ...(draftDir === undefined ? [] : o.draftTokens.split(',').map((k) => ({
      label: `draft model${o.layerDraft !== undefined ? ` (first ${o.layerDraft} layers)` : ''}, ${k}`,
      options: { draftModel: draftDir, draftModelTokens: Number(k) },
    }))),
    ...(medusaDir === undefined ? [] : [
      { label: `Medusa, ${medusaHeads} heads, chain of first choices`, options: { medusaHeads: medusaDir, medusaChoices: chain, draftModelTokens: medusaHeads } },
      ...o.medusaTokens.split(',').map((k) => ({
        label: `Medusa, ${medusaHeads} heads, tree of ${k}`, options: { medusaHeads: medusaDir, draftModelTokens: Number(k) },
      })),
    ]),
  ];
  const tokenizer = loadTokenizer(o.model);
  const text = (JSON.parse(readFileSync(join(defaultModelDir(), 'heldout_sample.json'), 'utf8')) as { text: string }).text;
  const sentences = text.split(/(?<=[.!?])\s+/).filter((s) => s.split(' ').length >= 8);
  const n = Number(o.prompts);
  const copy = sentences.slice(0, n).map((s) => tokenizer.encode(`${s}\n${s.split(' ').slice(0, 4).join(' ')}`));
  const plain = sentences.slice(n, 2 * n).map((s) => tokenizer.encode(s.split(' ').slice(0, 8).join(' ')));
  const maxTokens = Number(o.maxTokens);
  console.log(`model ${o.model} on ${o.device}, ${o.threads} threads (${cpus()[0]?.model ?? 'cpu'}), ${n} prompts a set, ${maxTokens} tokens each, ${o.sampled ? 'sampled (t 0.8, top-p 0.95)' : 'greedy'}, batch 1`);
  const rows: string[] = [];
  const differences: { drafter: string; set: string; prompt: number; at: number }[] = [];
  let base: Record<string, SetResult> = {};
  for (const drafter of drafters) {
    const executor = await Executor.load(o.model, { numThreads: Number(o.threads), device: o.device, ...drafter.options });
    try {
      await runSet(executor, [copy[0]!], 8);  // warm-up
      for (const [name, prompts] of [['copy', copy], ['plain', plain]] as const) {
        const r = await runSet(executor, prompts, maxTokens, o.sampled);
        if (drafter.label === 'none') base = { ...base, [name]: r };
        const b = base[name]!;
        const equal = JSON.stringify(r.outputs) === JSON.stringify(b.outputs);
        r.outputs.forEach((out, i) => {
          const at = out.findIndex((t, k) => t !== b.outputs[i]![k]);
          if (at >= 0 || out.length !== b.outputs[i]!.length) differences.push({ drafter: drafter.label, set: name, prompt: i, at: at >= 0 ? at : Math.min(out.length, b.outputs[i]!.length) });
        });
        rows.push(`| ${name} | ${drafter.label} | ${(r.tokens / r.seconds).toFixed(0)} | ${r.perPass.toFixed(2)} | **${((b.seconds / r.seconds)).toFixed(2)}×** | ${equal ? 'yes' : 'NO'} |`);
      }
    } finally {
      await executor.shutdown();
    }
  }
  console.log('\n| prompts | guesses (drafter, per step) | output tok/s | tokens gained per pass | speedup vs none | outputs equal to none |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
  if (differences.length > 0) await explain(o, differences, { copy, plain }, maxTokens);
}

/** The plain run's top-2 logit margin at each first differing token (its generation logits, without speculation). */
async function explain(o: Options, differences: { drafter: string; set: string; prompt: number; at: number }[],
  sets: Record<string, number[][]>, maxTokens: number): Promise<void> {
  const executor = await Executor.load(o.model, { numThreads: Number(o.threads), device: o.device });
  try {
    console.log('\n| drafter | prompts | prompt | first differing token | plain top-2 margin there (logits) |\n|---|---|---|---|---|');
    for (const d of differences) {
      const r = await executor.generate({ inputTokenIds: sets[d.set]![d.prompt]!, maxTokens, output: { excludeInputFromOutput: true, returnGenerationLogits: true } });
      const logits = r.generationLogits;
      const vocab = executor.modelConfig.vocabSize;
      let margin = NaN;
      if (logits && logits.length >= (d.at + 1) * vocab) {
        const row = logits.subarray(d.at * vocab, (d.at + 1) * vocab);
        let a = -Infinity, b = -Infinity;
        for (const x of row) if (x > a) { b = a; a = x; } else if (x > b) b = x;
        margin = a - b;
      }
      console.log(`| ${d.drafter} | ${d.set} | ${d.prompt} | ${d.at} | ${margin.toFixed(4)} |`);
    }
  } finally {
    await executor.shutdown();
  }
}

await main();
