// --kv-cache-dtype fp8 (issue 24) on the CPU backend: K/V stored as e4m3 with per-layer scales. The bundled model
// (trained, so its K/V look like a real model's) with FP8 KV gives the top-1 token of its float-KV run at every
// prompt position where the float run's top-2 margin is clear (native/test/kv-fp8.cpp bounds how far FP8 KV moves its
// logits: under 0.5 here, and checks decode steps teacher-forced), in one batch and at tp 2 through the API under
// mpirun; its greedy continuations agree up to the first unclear step; the pool holds four times the tokens in the
// same bytes; the model config and the startup log say which KV precision runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { defaultModelDir, packageRoot } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { startLauncher } from '../../helpers/launched-cluster.js';
import { freePort, processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

const BUNDLED = defaultModelDir();
const STEPS = 16;
// Twice the largest move of any logit that FP8 KV caused on the bundled model's held-out text (0.47).
const CLEAR_MARGIN = 1.0;
const HELDOUT = (JSON.parse(readFileSync(join(packageRoot(), 'test', 'fixtures', 'quality', 'brown-heldout-ids.json'), 'utf8')) as { input_ids: number[] }).input_ids;
const PROMPT_LEN = 48;
const PROMPTS = [0, 3000, 9000, 27000].map((at) => HELDOUT.slice(at, at + PROMPT_LEN));

interface Run { top1: number[]; margins: number[]; tokens: number[] }

// Per prompt position: the top-1 token of the context logits and its margin over the second; and the greedy tokens.
function summarize(logits: Float32Array, tokens: number[]): Run {
  const vocab = logits.length / PROMPT_LEN;
  const top1: number[] = [];
  const margins: number[] = [];
  for (let p = 0; p < PROMPT_LEN; p += 1) {
    const row = logits.subarray(p * vocab, (p + 1) * vocab);
    let a = 0;
    for (let j = 1; j < vocab; j += 1) if (row[j]! > row[a]!) a = j;
    let b = a === 0 ? 1 : 0;
    for (let j = 0; j < vocab; j += 1) if (j !== a && row[j]! > row[b]!) b = j;
    top1.push(a);
    margins.push(row[a]! - row[b]!);
  }
  return { top1, margins, tokens };
}

async function runs(kvCacheDtype: 'auto' | 'fp8'): Promise<{ runs: Run[]; dtype: string; allFree: boolean }> {
  const executor = await Executor.load(BUNDLED, { numThreads: 2, kvCacheDtype });
  try {
    const results = await Promise.all(PROMPTS.map((ids) => executor.generate({
      inputTokenIds: ids, maxTokens: STEPS, endId: -1, output: { excludeInputFromOutput: true, returnContextLogits: true },
    })));
    const stats = executor.kvCacheStats();
    return { runs: results.map((r) => summarize(r.contextLogits!, r.outputTokenIds![0]!)), dtype: executor.modelConfig.kvCacheDtype, allFree: stats.freeNumBlocks === stats.maxNumBlocks };
  } finally {
    await executor.shutdown();
  }
}

const reference = runs('auto');

function agrees(t: Test, base: Run[], got: Run[], where: string): void {
  let clear = 0;
  let equal = 0;
  base.forEach((b, i) => b.margins.forEach((m, p) => {
    if (m < CLEAR_MARGIN) return;
    clear += 1;
    equal += got[i]!.top1[p] === b.top1[p] ? 1 : 0;
  }));
  t.ok(clear >= 40, `${where}: ${clear} of ${base.length * PROMPT_LEN} prompt positions have a clear margin`);
  t.equal(equal, clear, `${where}: the float-KV top-1 token at each of them`);
  base.forEach((b, i) => {
    let n = 0;
    while (n < STEPS && got[i]!.tokens[n] === b.tokens[n]) n += 1;
    t.comment(`${where}: prompt ${i}: greedy tokens equal for ${n} of ${STEPS} steps (after the first unclear step they may part)`);
  });
}

t.test('FP8 KV, four prompts in one batch: the float-KV top-1 tokens wherever they are clear, every block free after', async (t) => {
  const base = await reference;
  t.equal(base.dtype, 'float32');
  const fp8 = await runs('fp8');
  t.equal(fp8.dtype, 'fp8 (e4m3, per-layer k/v scales 1 (the checkpoint has none))');
  agrees(t, base.runs, fp8.runs, 'one rank');
  t.ok(fp8.allFree, 'all KV blocks free');
});

t.test('the same KV memory holds four times the tokens (one byte a value against four)', async (t) => {
  const bytes = 2 * 1024 * 1024;
  const sized = async (kvCacheDtype: 'auto' | 'fp8') => {
    const executor = await Executor.load(fixtureDir('tiny-llama'), { numThreads: 1, kvCacheDtype, kvCacheMemoryBytes: bytes, tokensPerBlock: 16 });
    const blocks = executor.kvCacheStats().maxNumBlocks;
    const dtype = executor.modelConfig.kvCacheDtype;
    await executor.shutdown();
    return { blocks, dtype };
  };
  const f = await sized('auto');
  const e = await sized('fp8');
  t.equal(f.dtype, 'float32');
  t.equal(e.blocks, 4 * f.blocks, `${e.blocks} blocks with FP8 KV, ${f.blocks} with float32 KV, in ${bytes} bytes`);
});

t.test('an unknown KV dtype is refused naming the field and the value', async (t) => {
  await t.rejects(Executor.load(fixtureDir('tiny-llama'), { kvCacheDtype: 'int8' as 'fp8' }), { message: /field 'kvCacheDtype' must be 'auto' or 'fp8', got 'int8'/ });
});

t.test('trtllm-launch --world-size 2 --kv-cache-dtype fp8: tp 2 gives the clear float-KV tokens through the API', async (t) => {
  const base = await reference;
  const port = await freePort();
  const metricsPort = await freePort();
  const launcher = startLauncher(['--model', BUNDLED, '--world-size', '2', '--oversubscribe', '--threads', '1', '--kv-cache-dtype', 'fp8',
    '--http-port', String(port), '--metrics-port', String(metricsPort), '--grpc-port', String(await freePort())]);
  const { child } = launcher;
  t.teardown(() => { child.kill('SIGKILL'); });
  const up = await launcher.ready;
  t.ok(up, up ? 'ready' : `not ready: ${launcher.output().slice(-1500)}`);
  t.match(launcher.output(), /KV cache fp8 \(e4m3, per-layer k\/v scales 1 \(the checkpoint has none\)\)/, 'the startup log says so');
  const scrape = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  t.match(scrape, /^trtllm_model_precision_info\{[^}]*weights="as stored \(16-bit\)",kv_cache="fp8 \(e4m3, per-layer k\/v scales 1 \(the checkpoint has none\)\)"\} 1$/m,
    'and so do the metrics');
  const served: Run[] = [];
  for (const ids of PROMPTS) {
    const res = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: ids, request_output_len: STEPS, end_id: -1, return_context_logits: true }),
    });
    const json = await res.json() as { output_ids?: number[]; context_logits?: number[] };
    t.equal(res.status, 200);
    served.push(summarize(Float32Array.from(json.context_logits ?? []), json.output_ids?.slice(ids.length) ?? []));
  }
  agrees(t, base.runs, served, 'tp 2');
  child.kill('SIGTERM');
  const result = await child;
  t.equal(result.exitCode, 0, result.exitCode === 0 ? 'exit 0' : `exit ${result.exitCode}: ${launcher.output().slice(-800)}`);
  t.ok(await waitFor(() => processesWith(`--http-port ${port}`).length === 0), 'nothing left');
});
