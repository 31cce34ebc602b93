// Needs node-llama-cpp, installed on demand (not a dependency):
//   npm install --no-save node-llama-cpp@3.22.1 && npx tsc -p bench/tsconfig.llama-cpp.json
// Our CPU executor side by side with llama.cpp (through the node-llama-cpp npm package and its CPU prebuilt) on the
// same weights: the dummy-weight Llama checkpoints of bench/dummy-checkpoint.ts exported to GGUF by
// bench/gguf-export.ts. Issue 3: batch-1 decode and prefill tokens/s, aggregate decode throughput with 16 concurrent
// sequences, and the time saved by prefix reuse on a shared 1k-token system prompt.
//
// Both engines run in this one process, with the same thread count, one after the other (never at the same time):
// each measurement is repeated --repeats times in rounds that alternate the two engines, and the best is kept.
// All figures are wall clock as seen from JavaScript (the cost of each binding included).
//
//   node dist/bench/llama-cpp-compare.js [--threads 2] [--models 22m,100m] [--repeats 3] [--prefill 512]
//     [--decode-prompt 128] [--gen 128] [--concurrency 16] [--concurrent-gen 64] [--system 1024] [--suffix 32]
//     [--prefix-requests 8] [--prefix-gen 16] [--f16] [--skip-verify]
import { cpus, totalmem } from 'node:os';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { getLlama, LlamaLogLevel, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from 'node-llama-cpp';

import type { IterationStats, NativeResponse } from '../worker/binding/addon-types.js';
import { packageRoot } from '../worker/common/package-root.js';
import { Executor, type ExecutorOptions } from '../worker/executor/executor.js';
import { BENCH_SHAPE, type LlamaShape, parameterCount, writeDummyLlama } from './dummy-checkpoint.js';
import { exportGguf } from './gguf-export.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const flag = (name: string): boolean => process.argv.includes(name);
const log = (s: string): void => { process.stderr.write(`${s}\n`); };

/** A ~100M-parameter Llama (GQA 12/4, head_dim 64, 32k vocab, tied): big enough not to be overhead-dominated. */
const SHAPE_100M: LlamaShape = {
  vocabSize: 32000, hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, intermediateSize: 2048,
  maxPositionEmbeddings: 2048,
};
const SHAPES: Record<string, LlamaShape> = { '22m': BENCH_SHAPE, '100m': SHAPE_100M };

const opts = {
  threads: Number(arg('--threads', '2')),
  models: arg('--models', '22m,100m').split(','),
  repeats: Number(arg('--repeats', '3')),
  prefill: Number(arg('--prefill', '512')),
  decodePrompt: Number(arg('--decode-prompt', '128')),
  gen: Number(arg('--gen', '128')),
  concurrency: Number(arg('--concurrency', '16')),
  concurrentGen: Number(arg('--concurrent-gen', '64')),
  system: Number(arg('--system', '1024')),
  suffix: Number(arg('--suffix', '32')),
  prefixRequests: Number(arg('--prefix-requests', '8')),
  prefixGen: Number(arg('--prefix-gen', '16')),
  f16: flag('--f16'),
  verify: !flag('--skip-verify'),
};

/** Deterministic token ids in [3, vocab) (0-2 are unk/bos/eos), different per `salt`. */
function tokens(n: number, vocab: number, salt: number): number[] {
  let s = (salt * 2654435761 + 12345) >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) {
    s ^= s << 13; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out.push(3 + (s % (vocab - 3)));
  }
  return out;
}

const now = (): number => performance.now();
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const mean = (xs: number[]): number => (xs.length ? sum(xs) / xs.length : NaN);

/** One measurement per engine: the best (highest `value`) over the repeats is kept. */
interface Measure { value: number; detail: string }
type Results = Map<string, Measure>;
function keepBest(results: Results, key: string, m: Measure, lowerIsBetter = false): void {
  const prev = results.get(key);
  if (!prev || (lowerIsBetter ? m.value < prev.value : m.value > prev.value)) results.set(key, m);
}

// ------------------------------------------------------------------------------------------------ our executor

interface TokenTimes { first: number; last: number; count: number; times: number[] }

/** Enqueues a streaming request and records the JS arrival time of each generated token. */
async function oursStream(ex: Executor, prompt: number[], maxTokens: number): Promise<TokenTimes & { start: number }> {
  const start = now();
  const handle = ex.enqueue({ inputTokenIds: prompt, maxTokens, streaming: true, output: { excludeInputFromOutput: true } });
  const times: number[] = [];
  for await (const r of handle as AsyncIterable<NativeResponse>) {
    const n = r.outputTokenIds?.[0]?.length ?? 0;
    const t = now();
    for (let i = 0; i < n; i += 1) times.push(t);
  }
  return { start, first: times[0] ?? NaN, last: times[times.length - 1] ?? NaN, count: times.length, times };
}

function decodeSteps(stats: IterationStats[]): { n: number; meanMs: number; batch: number } {
  const d = stats.filter((s) => s.inflightBatchingStats.numContextRequests === 0 && s.inflightBatchingStats.numGenRequests > 0);
  return { n: d.length, meanMs: mean(d.map((s) => s.iterLatencyMs)), batch: mean(d.map((s) => s.inflightBatchingStats.numGenRequests)) };
}

async function oursRound(ex: Executor, vocab: number, round: number, res: Results): Promise<void> {
  // (a) prefill: one request of `prefill` prompt tokens, one generated token; tokens/s = prompt / time to first token.
  ex.iterationStats();
  const p = await oursStream(ex, tokens(opts.prefill, vocab, 1000 + round), 1);
  const prefillStats = ex.iterationStats().filter((s) => s.inflightBatchingStats.numContextRequests > 0);
  const engineMs = sum(prefillStats.map((s) => s.iterLatencyMs));
  keepBest(res, 'prefill', { value: opts.prefill / ((p.first - p.start) / 1000), detail: `TTFT ${(p.first - p.start).toFixed(1)} ms (engine iteration ${engineMs.toFixed(1)} ms)` });
  // (a) batch-1 decode: tokens after the first / time from the first to the last.
  const d = await oursStream(ex, tokens(opts.decodePrompt, vocab, 2000 + round), opts.gen);
  const ds = decodeSteps(ex.iterationStats());
  keepBest(res, 'decode1', { value: (d.count - 1) / ((d.last - d.first) / 1000), detail: `${d.count} tokens; engine step ${ds.meanMs.toFixed(2)} ms x ${ds.n}` });
  // (b) `concurrency` requests in flight at once.
  const c = await Promise.all(Array.from({ length: opts.concurrency }, (_, i) => oursStream(ex, tokens(opts.decodePrompt, vocab, 3000 + 100 * round + i), opts.concurrentGen)));
  const cs = decodeSteps(ex.iterationStats());
  recordConcurrent(res, c, `engine step ${cs.meanMs.toFixed(2)} ms x ${cs.n} at mean batch ${cs.batch.toFixed(1)}`);
}

function recordConcurrent(res: Results, c: (TokenTimes & { start: number })[], extra: string): void {
  const start = Math.min(...c.map((x) => x.start));
  const allFirst = Math.max(...c.map((x) => x.first));
  const end = Math.max(...c.map((x) => x.last));
  const total = sum(c.map((x) => x.count));
  const afterAllFirst = sum(c.map((x) => x.times.filter((t) => t > allFirst).length));
  keepBest(res, 'decodeN', { value: afterAllFirst / ((end - allFirst) / 1000), detail: `${afterAllFirst} tokens in ${(end - allFirst).toFixed(0)} ms after every sequence's first token; ${extra}` });
  keepBest(res, 'e2eN', { value: total / ((end - start) / 1000), detail: `${total} tokens in ${(end - start).toFixed(0)} ms incl. prefill` });
}

/** (c) `prefixRequests` requests one after another: the same system prompt, a different suffix each. */
async function prefixRound(
  run: (prompt: number[]) => Promise<{ ttft: number; total: number }>, vocab: number, round: number, salt: number,
): Promise<{ firstTtft: number; restTtft: number; totalMs: number }> {
  // A system prompt never seen before (per round and per mode): the first request of each round is always cold.
  const system = tokens(opts.system, vocab, 5000 + 10 * round + salt);
  const ttfts: number[] = [];
  const t0 = now();
  for (let i = 0; i < opts.prefixRequests; i += 1) {
    const r = await run([...system, ...tokens(opts.suffix, vocab, 6000 + 100 * round + i)]);
    ttfts.push(r.ttft);
  }
  return { firstTtft: ttfts[0]!, restTtft: mean(ttfts.slice(1)), totalMs: now() - t0 };
}

function recordPrefix(res: Results, key: string, r: { firstTtft: number; restTtft: number; totalMs: number }, extra = ''): void {
  keepBest(res, `${key}.total`, { value: r.totalMs, detail: `first TTFT ${r.firstTtft.toFixed(0)} ms, mean TTFT of the rest ${r.restTtft.toFixed(1)} ms${extra}` }, true);
  keepBest(res, `${key}.ttft`, { value: r.restTtft, detail: '' }, true);
}

// ------------------------------------------------------------------------------------------------ llama.cpp

interface LlamaSide { model: LlamaModel; single: LlamaContext; seq: LlamaContextSequence; multi?: LlamaContext }

async function llamaStream(seq: LlamaContextSequence, prompt: number[], maxTokens: number): Promise<TokenTimes & { start: number }> {
  const start = now();
  const times: number[] = [];
  for await (const _tok of seq.evaluate(prompt as Token[], { temperature: 0, yieldEogToken: true })) {
    times.push(now());
    if (times.length >= maxTokens) break;
  }
  return { start, first: times[0] ?? NaN, last: times[times.length - 1] ?? NaN, count: times.length, times };
}

async function llamaRound(side: LlamaSide, vocab: number, round: number, res: Results): Promise<void> {
  const { seq } = side;
  await seq.clearHistory();
  const p = await llamaStream(seq, tokens(opts.prefill, vocab, 1000 + round), 1);
  keepBest(res, 'prefill', { value: opts.prefill / ((p.first - p.start) / 1000), detail: `TTFT ${(p.first - p.start).toFixed(1)} ms` });
  log(`  llama.cpp prefill: ${(p.first - p.start).toFixed(0)} ms`);
  await seq.clearHistory();
  const d = await llamaStream(seq, tokens(opts.decodePrompt, vocab, 2000 + round), opts.gen);
  keepBest(res, 'decode1', { value: (d.count - 1) / ((d.last - d.first) / 1000), detail: `${d.count} tokens` });
  log(`  llama.cpp decode: ${d.count} tokens in ${(d.last - d.first).toFixed(0)} ms`);
  await seq.clearHistory();
  if (side.multi) {
    const seqs = Array.from({ length: opts.concurrency }, () => side.multi!.getSequence());
    try {
      const c = await Promise.all(seqs.map((s, i) => llamaStream(s, tokens(opts.decodePrompt, vocab, 3000 + 100 * round + i), opts.concurrentGen)));
      recordConcurrent(res, c, `${opts.concurrency} sequences of one context`);
    } finally {
      for (const s of seqs) s.dispose();
    }
  }
}

async function loadLlamaSide(llama: Llama, gguf: string, withMulti: boolean): Promise<LlamaSide> {
  const model = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
  const need = Math.max(opts.prefill, opts.decodePrompt + opts.gen, opts.system + opts.suffix + opts.prefixGen) + 8;
  const single = await model.createContext({ contextSize: need, threads: opts.threads, sequences: 1, batchSize: 512 });
  const side: LlamaSide = { model, single, seq: single.getSequence() };
  if (withMulti) {
    side.multi = await model.createContext({
      contextSize: opts.decodePrompt + opts.concurrentGen + 8, sequences: opts.concurrency, threads: opts.threads, batchSize: 512,
    });
  }
  return side;
}

async function disposeLlamaSide(side: LlamaSide): Promise<void> {
  await side.multi?.dispose();
  await side.single.dispose();
  await side.model.dispose();
}

// ------------------------------------------------------------------------------------------------ verification

/** Greedy tokens of both engines on the same prompt, and teacher-forced logits on one sequence. */
async function verify(ex: Executor, llama: Llama, gguf: string, vocab: number): Promise<string> {
  const prompt = [1, ...tokens(31, vocab, 42)];
  const n = 32;
  const ours = (await ex.generate({ inputTokenIds: prompt, maxTokens: n, output: { excludeInputFromOutput: true } })).outputTokenIds?.[0] ?? [];
  const model = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
  try {
    // An F32 KV cache where this build accepts one (llama.cpp defaults to F16), to compare the weights' math alone.
    let ctx: LlamaContext;
    let kv = 'F32';
    try {
      ctx = await model.createContext({ contextSize: 256, threads: opts.threads, experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32' });
    } catch {
      kv = 'F16';
      ctx = await model.createContext({ contextSize: 256, threads: opts.threads });
    }
    try {
      const seq = ctx.getSequence();
      const theirs: number[] = [];
      for await (const t of seq.evaluate(prompt as Token[], { temperature: 0, yieldEogToken: true })) {
        theirs.push(t);
        if (theirs.length >= n) break;
      }
      let match = 0;
      while (match < n && ours[match] === theirs[match]) match += 1;
      // Teacher-forced: logits at every position of prompt + our tokens.
      const full = [...prompt, ...ours.slice(0, n - 1)];
      const ref = await ex.generate({ inputTokenIds: full, maxTokens: 1, output: { returnContextLogits: true } });
      const ourLogits = ref.contextLogits!;
      await seq.clearHistory();
      const out = await seq.controlledEvaluate(full.map((t) => [t as Token, { generateNext: { logits: true } }] as [Token, { generateNext: { logits: true } }]));
      let agree = 0, maxDiff = 0, maxAbs = 0;
      for (let pos = 0; pos < full.length; pos += 1) {
        const m = out[pos]?.next.logits;
        if (!m) continue;
        let ourArg = 0, theirArg = 0, ourBest = -Infinity, theirBest = -Infinity;
        for (let v = 0; v < vocab; v += 1) {
          const o = ourLogits[pos * vocab + v]!, t = m.get(v as Token) ?? NaN;
          maxDiff = Math.max(maxDiff, Math.abs(o - t));
          maxAbs = Math.max(maxAbs, Math.abs(o));
          if (o > ourBest) { ourBest = o; ourArg = v; }
          if (t > theirBest) { theirBest = t; theirArg = v; }
        }
        if (ourArg === theirArg) agree += 1;
      }
      return `greedy: ${match}/${n} tokens identical (distinct tokens in ours: ${new Set(ours).size}); teacher-forced over ${full.length} positions: `
        + `argmax agrees at ${agree}, max |logit difference| ${maxDiff.toExponential(2)} (max |logit| ${maxAbs.toFixed(2)}; llama.cpp KV cache ${kv})`;
    } finally {
      await ctx.dispose();
    }
  } finally {
    await model.dispose();
  }
}

// ------------------------------------------------------------------------------------------------ main

interface ModelReport { name: string; params: number; verify: string; ours: Results; llama: Results; llamaF16?: Results; notes: string[] }

async function benchModel(llama: Llama, name: string): Promise<ModelReport> {
  const shape = SHAPES[name];
  if (!shape) throw new Error(`unknown model ${name} (known: ${Object.keys(SHAPES).join(', ')})`);
  const root = join(packageRoot(), 'build', 'bench-models');
  log(`[${name}] writing/reusing the dummy checkpoint ...`);
  const dir = writeDummyLlama(join(root, name === '22m' ? 'llama-22m' : `llama-${name}`), shape);
  mkdirSync(join(root, 'gguf'), { recursive: true });
  const gguf = (f16: boolean): string => {
    const path = join(root, 'gguf', `llama-${name}-${f16 ? 'f16' : 'f32'}.gguf`);
    if (!existsSync(path) || statSync(path).mtimeMs < statSync(join(dir, 'model.safetensors')).mtimeMs) {
      log(`[${name}] exporting ${path} ...`);
      exportGguf(dir, path, { f16, name: `dummy llama ${name}` });
    }
    return path;
  };
  const ggufF32 = gguf(false);
  const ggufF16 = opts.f16 ? gguf(true) : undefined;
  const vocab = shape.vocabSize;
  const report: ModelReport = { name, params: parameterCount(shape), verify: 'skipped', ours: new Map(), llama: new Map(), notes: [] };

  const maxSeqLen = shape.maxPositionEmbeddings;
  const base: ExecutorOptions = {
    numThreads: opts.threads, maxBatchSize: Math.max(32, opts.concurrency), maxNumTokens: 8192, tokensPerBlock: 64, maxSeqLen,
    maxTokensInPagedKvCache: Math.max(opts.concurrency * (opts.decodePrompt + opts.concurrentGen + 64), 4 * maxSeqLen),
  };
  log(`[${name}] loading our executor ...`);
  const ex = await Executor.load(dir, { ...base, enableKvCacheReuse: false });
  try {
    if (opts.verify) {
      log(`[${name}] verifying the GGUF export against our executor ...`);
      report.verify = await verify(ex, llama, ggufF32, vocab);
      log(`[${name}] ${report.verify}`);
    }
    log(`[${name}] loading llama.cpp (F32) ...`);
    const side = await loadLlamaSide(llama, ggufF32, true);
    try {
      await ex.generate({ inputTokenIds: tokens(32, vocab, 7), maxTokens: 4 });  // warm-up
      await llamaStream(side.seq, tokens(32, vocab, 7), 4);
      for (let round = 0; round < opts.repeats; round += 1) {
        log(`[${name}] round ${round + 1}/${opts.repeats}: ours (prefill ${opts.prefill}, decode ${opts.gen}, ${opts.concurrency} concurrent) ...`);
        await oursRound(ex, vocab, round, report.ours);
        log(`[${name}] round ${round + 1}/${opts.repeats}: llama.cpp ...`);
        await llamaRound(side, vocab, round, report.llama);
        log(`[${name}] round ${round + 1}/${opts.repeats}: prefix reuse off, ours and llama.cpp ...`);
        recordPrefix(report.ours, 'prefixOff', await prefixRound(async (prompt) => {
          const r = await oursStream(ex, prompt, opts.prefixGen);
          return { ttft: r.first - r.start, total: r.last - r.start };
        }, vocab, round, 0));
        recordPrefix(report.llama, 'prefixOff', await prefixRound(async (prompt) => {
          await side.seq.clearHistory();
          const r = await llamaStream(side.seq, prompt, opts.prefixGen);
          return { ttft: r.first - r.start, total: r.last - r.start };
        }, vocab, round, 1));
        // llama.cpp with reuse: keep the sequence's longest common prefix with the new prompt, evaluate the rest.
        recordPrefix(report.llama, 'prefixOn', await prefixRound(async (prompt) => {
          const t0 = now();
          await side.seq.adaptStateToTokens(prompt as Token[], false);
          const keep = Math.min(side.seq.nextTokenIndex, prompt.length - 1);
          if (keep < side.seq.nextTokenIndex) await side.seq.eraseContextTokenRanges([{ start: keep, end: side.seq.nextTokenIndex }]);
          const r = await llamaStream(side.seq, prompt.slice(keep), opts.prefixGen);
          return { ttft: r.first - t0, total: r.last - t0 };
        }, vocab, round, 2));
      }
    } finally {
      await disposeLlamaSide(side);
    }
    if (ggufF16) {
      log(`[${name}] llama.cpp F16 weights (extra row) ...`);
      const side16 = await loadLlamaSide(llama, ggufF16, true);
      report.llamaF16 = new Map();
      try {
        await llamaStream(side16.seq, tokens(32, vocab, 7), 4);
        for (let round = 0; round < opts.repeats; round += 1) await llamaRound(side16, vocab, round, report.llamaF16);
      } finally {
        await disposeLlamaSide(side16);
      }
    }
  } finally {
    await ex.shutdown();
  }

  // Ours with prefix reuse on: its own executor (the option is implemented by another issue; until it is, the
  // engine accepts it and reuses nothing, and the figures equal the reuse-off ones).
  log(`[${name}] prefix reuse on, ours ...`);
  let exReuse: Executor | undefined;
  try {
    exReuse = await Executor.load(dir, { ...base, enableKvCacheReuse: true });
    await exReuse.generate({ inputTokenIds: tokens(32, vocab, 7), maxTokens: 4 });
    const before = exReuse.kvCacheStats().reusedBlocks;
    for (let round = 0; round < opts.repeats; round += 1) {
      const r = await prefixRound(async (prompt) => {
        const x = await oursStream(exReuse!, prompt, opts.prefixGen);
        return { ttft: x.first - x.start, total: x.last - x.start };
      }, vocab, round, 3);
      recordPrefix(report.ours, 'prefixOn', r);
    }
    const reused = exReuse.kvCacheStats().reusedBlocks - before;
    report.notes.push(`our executor with enableKvCacheReuse: ${reused} KV blocks reused over ${opts.repeats} rounds`
      + (reused === 0 ? ' (prefix reuse is not implemented in this build yet, so "on" = "off")' : ''));
  } catch (e) {
    report.notes.push(`our executor with enableKvCacheReuse failed: ${(e as Error).message}`);
  } finally {
    await exReuse?.shutdown();
  }
  return report;
}

function fmt(x: number | undefined, digits = 0): string {
  return x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits);
}

function table(reports: ModelReport[]): string {
  const lines: string[] = [];
  const hasF16 = reports.some((r) => r.llamaF16);
  lines.push(`| model | measurement | ours | llama.cpp (F32) | ours / llama.cpp | goal |${hasF16 ? ' llama.cpp (F16 weights) |' : ''}`);
  lines.push(`|---|---|---|---|---|---|${hasF16 ? '---|' : ''}`);
  for (const r of reports) {
    const m = `${r.name} (${(r.params / 1e6).toFixed(1)}M)`;
    const row = (label: string, key: string, goal: string, digits = 0): void => {
      const o = r.ours.get(key)?.value, l = r.llama.get(key)?.value;
      const f = r.llamaF16?.get(key)?.value;
      lines.push(`| ${m} | ${label} | ${fmt(o, digits)} | ${fmt(l, digits)} | ${o && l ? (o / l).toFixed(2) + '×' : 'n/a'} | ${goal} |${hasF16 ? ` ${fmt(f, digits)} |` : ''}`);
    };
    row(`prefill tokens/s, batch 1, prompt ${opts.prefill}`, 'prefill', '');
    row(`decode tokens/s, batch 1 (prompt ${opts.decodePrompt}, ${opts.gen} generated)`, 'decode1', '≥ 1.0×');
    row(`aggregate decode tokens/s, ${opts.concurrency} concurrent sequences`, 'decodeN', '≥ 3×');
    row(`end-to-end generated tokens/s, ${opts.concurrency} concurrent (incl. prefill)`, 'e2eN', '');
    const pr = (label: string, key: string): void => {
      const o = r.ours.get(key)?.value, l = r.llama.get(key)?.value;
      lines.push(`| ${m} | ${label} | ${fmt(o, 1)} | ${fmt(l, 1)} | ${o && l ? (l / o).toFixed(2) + '× (speed)' : 'n/a'} | |${hasF16 ? ' |' : ''}`);
    };
    const sys = `${opts.prefixRequests} requests, ${opts.system}-token system prompt + ${opts.suffix}, ${opts.prefixGen} generated`;
    pr(`prefix reuse off: total ms (${sys})`, 'prefixOff.total');
    pr('prefix reuse on: total ms', 'prefixOn.total');
    pr('prefix reuse off: mean TTFT ms, requests 2..N', 'prefixOff.ttft');
    pr('prefix reuse on: mean TTFT ms, requests 2..N', 'prefixOn.ttft');
    const saved = (res: Results): string => {
      const off = res.get('prefixOff.total')?.value, on = res.get('prefixOn.total')?.value;
      return off && on ? `${(off - on).toFixed(0)} ms (${((1 - on / off) * 100).toFixed(0)}%)` : 'n/a';
    };
    lines.push(`| ${m} | time saved by prefix reuse (total) | ${saved(r.ours)} | ${saved(r.llama)} | | |${hasF16 ? ' |' : ''}`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  log(`machine: ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; threads ${opts.threads}; OMP_NUM_THREADS=${process.env.OMP_NUM_THREADS ?? '(unset)'}`);
  // CPU only, and never download or build llama.cpp at run time: use the prebuilt binary package or fail.
  const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, usePrebuiltBinaries: true, maxThreads: opts.threads, logLevel: LlamaLogLevel.error, progressLogs: false });
  log(`llama.cpp: ${llama.buildType} binary, gpu=${String(llama.gpu)}, llama.cpp release ${llama.llamaCppRelease.release}, maxThreads ${llama.maxThreads}`);
  const reports: ModelReport[] = [];
  try {
    for (const name of opts.models) reports.push(await benchModel(llama, name));
  } finally {
    await llama.dispose();
  }
  const out: string[] = [];
  out.push(`threads ${opts.threads}; best of ${opts.repeats} rounds; wall clock in JS; llama.cpp through node-llama-cpp (F16 KV cache, its default; ours fp32 KV)`);
  out.push('');
  out.push(table(reports));
  out.push('');
  for (const r of reports) {
    out.push(`- ${r.name} export check: ${r.verify}`);
    for (const n of r.notes) out.push(`- ${r.name}: ${n}`);
    for (const [side, res] of [['ours', r.ours], ['llama.cpp', r.llama], ['llama.cpp F16', r.llamaF16]] as const) {
      if (!res) continue;
      const details = [...res.entries()].filter(([, v]) => v.detail).map(([k, v]) => `${k}: ${v.detail}`);
      out.push(`- ${r.name} ${side}: ${details.join('; ')}`);
    }
  }
  console.log(out.join('\n'));
}

await main();
