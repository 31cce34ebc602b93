// KV prefix reuse and chunked context through the real addon and the tiny Llama fixture: both must leave the
// Hugging Face reference outputs (greedy tokens, log probs, context logits) unchanged, and the iteration stats
// must show them at work (reused blocks; context tokens per iteration within max_num_tokens).
import t from 'tap';

import type { NativeRequest } from '../../../worker/binding/addon-types.js';
import { Executor, type ExecutorOptions } from '../../../worker/executor/executor.js';
import { contextLogitsReference, fixtureDir, maxRelativeError, referenceCases } from '../../helpers/fixtures.js';
import { generateTogether } from '../../helpers/held-loop.js';

const MODEL = fixtureDir('tiny-llama');
const cases = referenceCases('tiny-llama');

async function withExecutor(t: { teardown(fn: () => unknown): void }, options: ExecutorOptions): Promise<Executor> {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 2, ...options });
  t.teardown(() => executor.shutdown());
  return executor;
}

function allFree(executor: Executor): boolean {
  const s = executor.kvCacheStats();
  return s.freeNumBlocks === s.maxNumBlocks && s.usedNumBlocks === 0;
}

const greedy = (c: (typeof cases)[number], extra: Partial<NativeRequest> = {}): NativeRequest => ({
  inputTokenIds: c.input_ids,
  maxTokens: c.max_new_tokens,
  output: { excludeInputFromOutput: true, returnLogProbs: true },
  ...extra,
});

t.test('enableKvCacheReuse: reference outputs, reused blocks for a shared prefix', async (t) => {
  const executor = await withExecutor(t, { enableKvCacheReuse: true });
  // First pass fills the cache; the second (all at once) finds every prompt's full blocks but the last token's.
  for (const pass of ['cold', 'warm']) {
    const before = executor.kvCacheStats().reusedBlocks;
    const results = await generateTogether(executor, cases.map((c) => greedy(c)));
    cases.forEach((c, i) => {
      t.same(results[i]!.outputTokenIds?.[0], c.greedy_output_ids, `${pass} ${c.name}: reference greedy tokens`);
      const lp = results[i]!.logProbs?.[0] ?? [];
      const lpErr = Math.max(...lp.map((v, j) => Math.abs(v - c.greedy_log_probs[j]!)));
      t.ok(lpErr < 1e-3, `${pass} ${c.name}: log probs within 1e-3 (${lpErr.toExponential(2)})`);
    });
    const reused = executor.kvCacheStats().reusedBlocks - before;
    // Prompts of 16, 32, 50, 70 tokens: full blocks strictly before the last token: 0 + 1 + 3 + 4.
    if (pass === 'cold') t.equal(reused, 0, 'cold: nothing to reuse');
    else t.equal(reused, 8, 'warm: 8 blocks reused');
  }
  t.ok(allFree(executor), 'cached blocks count as free');

  // A new prompt sharing case3's first 3 blocks: same output as without reuse, 3 blocks reused, and its context
  // iteration computes only the tokens past the shared prefix.
  const shared = [...cases[3]!.input_ids.slice(0, 48), ...cases[1]!.input_ids.slice(1, 20)];
  const request: NativeRequest = { inputTokenIds: shared, maxTokens: 12, output: { excludeInputFromOutput: true } };
  const plain = await withExecutor(t, {});
  const expected = await plain.generate(request);
  executor.iterationStats();
  const before = executor.kvCacheStats();
  const got = await executor.generate(request);
  t.same(got.outputTokenIds, expected.outputTokenIds, 'shared prefix: same tokens as without reuse');
  const after = executor.kvCacheStats();
  t.equal(after.reusedBlocks - before.reusedBlocks, 3, 'shared prefix: 3 blocks reused');
  const stats = executor.iterationStats();
  const ctx = stats.reduce((n, s) => n + s.inflightBatchingStats.numCtxTokens, 0);
  t.equal(ctx, shared.length - 48, `context tokens computed: ${ctx} of ${shared.length}`);
  t.ok(stats.some((s) => s.kvCacheStats.reusedBlocks === after.reusedBlocks), 'iteration stats carry reusedBlocks');
  t.ok(allFree(executor), 'all KV blocks free at the end');
});

t.test('enableChunkedContext: maxNumTokens 16 gives the reference tokens and context logits', async (t) => {
  const executor = await withExecutor(t, { enableChunkedContext: true, maxNumTokens: 16 });
  executor.iterationStats();
  const results = await generateTogether(executor, cases.map((c) => greedy(c, {
    output: { excludeInputFromOutput: true, returnLogProbs: true, returnContextLogits: true },
  })));
  cases.forEach((c, i) => {
    t.same(results[i]!.outputTokenIds?.[0], c.greedy_output_ids, `${c.name}: reference greedy tokens`);
  });
  const i70 = cases.findIndex((c) => c.input_ids.length === 70);
  t.ok(i70 >= 0, 'the fixture has a 70-token case');
  const ref = contextLogitsReference('tiny-llama', i70);
  const logits = results[i70]!.contextLogits ?? [];
  t.equal(logits.length, ref.length, 'context logits of the 70-token prompt: [70, vocab], rows of every chunk');
  const err = maxRelativeError(logits, ref);
  t.ok(err < 1e-4, `context logits relative error ${err.toExponential(2)} < 1e-4`);
  const stats = executor.iterationStats();
  t.ok(stats.every((s) => s.inflightBatchingStats.numCtxTokens + s.inflightBatchingStats.numGenRequests <= 16),
    'every iteration within maxNumTokens 16');
  t.ok(stats.some((s) => s.inflightBatchingStats.numCtxTokens === 16 && s.inflightBatchingStats.numContextRequests === 1
    && s.inflightBatchingStats.numGenRequests === 0), 'full 16-token chunks');
  t.ok(allFree(executor), 'all KV blocks free at the end');
});

t.test('chunked context and reuse together keep the reference outputs', async (t) => {
  // 32 tokens per iteration leave a whole 16-token block for a prompt chunk next to a few decodes.
  const executor = await withExecutor(t, { enableChunkedContext: true, maxNumTokens: 32, enableKvCacheReuse: true });
  executor.iterationStats();
  for (const pass of ['cold', 'warm']) {
    const results = await generateTogether(executor, cases.map((c) => greedy(c)));
    cases.forEach((c, i) => t.same(results[i]!.outputTokenIds?.[0], c.greedy_output_ids, `${pass} ${c.name}`));
  }
  const stats = executor.iterationStats();
  t.ok(stats.every((s) => s.inflightBatchingStats.numCtxTokens + s.inflightBatchingStats.numGenRequests <= 32),
    'every iteration within maxNumTokens 32');
  t.ok(stats.some((s) => s.inflightBatchingStats.numCtxTokens > 0 && s.inflightBatchingStats.numGenRequests > 0),
    'prompt chunks interleaved with decodes');
  t.ok(executor.kvCacheStats().reusedBlocks > 0, 'blocks reused');
  t.ok(allFree(executor), 'all KV blocks free at the end');
});
