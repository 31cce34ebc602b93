// Executor behaviour through the real addon and the tiny Llama fixture: streaming, in-flight batching, sampling
// determinism, cancellation, KV pressure under both capacity policies, bad input, queue limits and shutdown.
import t from 'tap';

import type { NativeRequest, NativeResponse } from '../../../worker/binding/addon-types.js';
import { TrtllmError } from '../../../worker/common/errors.js';
import { Executor, type ExecutorOptions } from '../../../worker/executor/executor.js';
import { expectError, expectRejection } from '../../helpers/expect-error.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { cancelAfterOneIteration, generateTogether } from '../../helpers/held-loop.js';
import { waitFor } from '../../helpers/wait.js';

const MODEL = fixtureDir('tiny-llama');
const cases = referenceCases('tiny-llama');

async function withExecutor(t: { teardown(fn: () => unknown): void }, options: ExecutorOptions = {}): Promise<Executor> {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1, ...options });
  t.teardown(() => executor.shutdown());
  return executor;
}

function allFree(executor: Executor): boolean {
  const s = executor.kvCacheStats();
  return s.freeNumBlocks === s.maxNumBlocks && s.usedNumBlocks === 0;
}

async function waitIdle(executor: Executor): Promise<boolean> {
  return waitFor(() => executor.numActiveRequests() === 0);
}

t.test('streaming yields the same tokens as one final response', async (t) => {
  const executor = await withExecutor(t);
  const c = cases[1]!;
  const chunks: NativeResponse[] = [];
  for await (const r of executor.enqueue({ inputTokenIds: c.input_ids, maxTokens: 10, streaming: true })) chunks.push(r);
  t.ok(chunks.length >= 2, `several streamed responses (${chunks.length})`);
  t.ok(chunks.slice(0, -1).every((r) => !r.isFinal) && chunks.at(-1)!.isFinal, 'only the last is final');
  const streamed = chunks.flatMap((r) => r.outputTokenIds?.[0] ?? []);
  t.same(streamed, c.greedy_output_ids.slice(0, 10), 'streamed tokens = reference greedy');
  const whole = await executor.generate({ inputTokenIds: c.input_ids, maxTokens: 10 });
  t.same(whole.outputTokenIds?.[0], [...c.input_ids, ...c.greedy_output_ids.slice(0, 10)], 'non-streaming includes the prompt');
  t.ok(allFree(executor));
});

t.test('end_id stops generation with finish reason end_id', async (t) => {
  const executor = await withExecutor(t);
  const c = cases[0]!;
  const endId = c.greedy_output_ids[3]!;
  const stopAt = c.greedy_output_ids.indexOf(endId);
  const r = await executor.generate({ inputTokenIds: c.input_ids, maxTokens: 16, endId, output: { excludeInputFromOutput: true } });
  t.equal(r.finishReasons?.[0], 'end_id');
  // As TensorRT-LLM: the end token itself is not part of the output.
  t.same(r.outputTokenIds?.[0], c.greedy_output_ids.slice(0, stopAt), 'output stops before the end token');
});

t.test('requests of different lengths are batched in flight', async (t) => {
  const executor = await withExecutor(t);
  executor.iterationStats();
  // The long request's prompt runs alone (one iteration, then the loop holds); the short ones arrive while it is
  // generating, so the next iteration mixes their prompts with its decode.
  executor.holdIterations(1);
  const long = executor.enqueue({ inputTokenIds: cases[2]!.input_ids, maxTokens: 30 });
  t.ok(await executor.awaitHeld(), 'the loop holds');
  const short = [0, 1, 3].map((i) => executor.enqueue({ inputTokenIds: cases[i]!.input_ids, maxTokens: 4 + i }));
  executor.holdIterations(-1);
  const results = await Promise.all([long, ...short].map((h) => h.result()));
  t.ok(results.every((r) => r.finishReasons?.[0] === 'length'));
  const stats = executor.iterationStats();
  const mixed = stats.filter((s) => s.inflightBatchingStats.numContextRequests > 0 && s.inflightBatchingStats.numGenRequests > 0);
  const multi = stats.filter((s) => s.inflightBatchingStats.numScheduledRequests > 1);
  t.ok(multi.length > 0, `iterations with more than one request: ${multi.length}`);
  t.equal(mixed[0]?.inflightBatchingStats.numContextRequests, 3, 'the three prompts start next to the running decode');
  t.equal(mixed[0]?.inflightBatchingStats.numGenRequests, 1);
  t.ok(stats.every((s) => s.kvCacheStats.tokensPerBlock === 16), 'stats carry KV block info');
  t.ok(allFree(executor));
});

t.test('sampling: same seed, same tokens; different seeds differ; top_k=1 is greedy', async (t) => {
  const executor = await withExecutor(t);
  const base: NativeRequest = { inputTokenIds: cases[0]!.input_ids, maxTokens: 16, output: { excludeInputFromOutput: true } };
  const run = async (sampling: NativeRequest['sampling']) => (await executor.generate({ ...base, sampling })).outputTokenIds![0]!;
  const a = await run({ temperature: 1.5, topP: 1, seed: 42 });
  const b = await run({ temperature: 1.5, topP: 1, seed: 42 });
  t.same(a, b, 'same seed');
  const others = await Promise.all([1, 2, 3].map((seed) => run({ temperature: 1.5, topP: 1, seed })));
  t.ok(others.some((o) => JSON.stringify(o) !== JSON.stringify(a)), 'different seeds give different outputs');
  t.same(await run({ temperature: 1.5, topK: 1, seed: 9 }), cases[0]!.greedy_output_ids, 'top_k = 1 is greedy');
  t.same(await run({ temperature: 0, topP: 1 }), cases[0]!.greedy_output_ids, 'temperature 0 is greedy');
  t.same(await run({ temperature: 2 }), cases[0]!.greedy_output_ids, 'neither top_k nor top_p: greedy, as TensorRT-LLM');
  t.same(await run({ temperature: 1, topP: 1e-6, seed: 5 }), cases[0]!.greedy_output_ids, 'tiny top_p is greedy');
});

t.test('cancel mid-generation frees the KV cache within an iteration', async (t) => {
  const executor = await withExecutor(t);
  const maxTokens = 240 - cases[0]!.input_ids.length + 16;  // up to max_seq_len (256)
  // The tiny model decodes a token in well under a millisecond: the loop runs one iteration (the prompt and the
  // first token) and holds until the cancel is in, so the cancel lands after exactly one token.
  const seen = await cancelAfterOneIteration(executor, { inputTokenIds: cases[0]!.input_ids, maxTokens });
  t.equal(seen.at(-1)?.finishReasons?.[0], 'cancelled', 'the final response says cancelled');
  t.equal(seen.flatMap((r) => r.outputTokenIds?.[0] ?? []).length, 1, 'after the one token produced before the cancel');
  t.ok(await waitIdle(executor), 'nothing active');
  t.ok(allFree(executor), 'KV back to all free');
  // A cancel that arrives before the request's first iteration: no token at all.
  executor.holdIterations(0);
  const early = executor.enqueue({ inputTokenIds: cases[0]!.input_ids, maxTokens, streaming: true });
  early.cancel();
  executor.holdIterations(-1);
  const all = await early.responses();
  t.equal(all.at(-1)?.finishReasons?.[0], 'cancelled', 'cancelled at once');
  t.equal(all.flatMap((r) => r.outputTokenIds?.[0] ?? []).length, 0, 'before any token');
  t.ok(await waitIdle(executor), 'nothing active');
  t.ok(allFree(executor), 'KV back to all free');
});

t.test('KV pressure: max_utilization pauses and resumes with identical outputs; no_evict never pauses', async (t) => {
  // Four short prompts (one 16-token block each) that grow to 7 blocks each, in a pool of 10: any two of them
  // running at once overflow it, however the loop thread happens to interleave their arrival.
  const requests = cases.map((c, i) => ({ inputTokenIds: c.input_ids.slice(0, 12 + i), maxTokens: 100, output: { excludeInputFromOutput: true } }));
  const small = { maxTokensInPagedKvCache: 160 };
  const free = await withExecutor(t);
  const expected = await generateTogether(free, requests);

  const mu = await withExecutor(t, { ...small, schedulerPolicy: 'max_utilization' });
  // All four arrive before the first iteration: they start together and the pool must overflow.
  const got = await generateTogether(mu, requests);
  t.same(got.map((r) => r.outputTokenIds), expected.map((r) => r.outputTokenIds), 'max_utilization: same outputs');
  const paused = mu.iterationStats().reduce((n, s) => n + s.inflightBatchingStats.numPausedRequests, 0);
  t.ok(paused > 0, `max_utilization paused requests (${paused} pause events)`);
  t.ok(allFree(mu));

  const ne = await withExecutor(t, { ...small, schedulerPolicy: 'guaranteed_no_evict' });
  const got2 = await generateTogether(ne, requests);
  t.same(got2.map((r) => r.outputTokenIds), expected.map((r) => r.outputTokenIds), 'guaranteed_no_evict: same outputs');
  t.equal(ne.iterationStats().reduce((n, s) => n + s.inflightBatchingStats.numPausedRequests, 0), 0, 'never paused');
  t.ok(allFree(ne));
});

t.test('bad input: typed errors naming the field, executor keeps serving, KV stays clean', async (t) => {
  const executor = await withExecutor(t);
  const bad: [unknown, RegExp][] = [
    [{ inputTokenIds: [], maxTokens: 4 }, /inputTokenIds is empty/],
    [{ inputTokenIds: [1, 512], maxTokens: 4 }, /inputTokenIds\[1\]/],
    [{ inputTokenIds: [1], maxTokens: 0 }, /maxTokens/],
    [{ inputTokenIds: new Array(250).fill(3), maxTokens: 10 }, /exceeds max_seq_len 256/],
    [{ inputTokenIds: [1], maxTokens: 4, sampling: { temperature: Number.NaN } }, /temperature/],
    [{ inputTokenIds: [1], maxTokens: 4, sampling: { topP: 2 } }, /topP/],
    [{ inputTokenIds: [1], maxTokens: 4, sampling: { topK: -1 } }, /topK/],
    [{ inputTokenIds: [1], maxTokens: 4, wat: 1 }, /unknown parameter 'wat'/],
  ];
  for (const [request, pattern] of bad) {
    expectError(t, () => executor.enqueue(request as NativeRequest), 'invalid_argument', pattern);
  }
  // The same checks hold in native code for callers that bypass the facade.
  const native = (executor as unknown as { native: { enqueue(r: unknown): number } }).native;
  const nativeBad: [unknown, RegExp][] = [
    [{ inputTokenIds: [], maxTokens: 4 }, /input_token_ids/],
    [{ inputTokenIds: [1, 9999], maxTokens: 4 }, /9999/],
    [{ inputTokenIds: [1], maxTokens: -3 }, /max_tokens/],
    [{ inputTokenIds: [1], maxTokens: 4, sampling: { temperature: -2 } }, /temperature/],
    [{ inputTokenIds: [1], maxTokens: 4, sampling: { topP: 0 } }, /top_p/],
    [{ inputTokenIds: [1.5], maxTokens: 4 }, /inputTokenIds\[0\]/],
    [{ inputTokenIds: 'x', maxTokens: 4 }, /inputTokenIds/],
  ];
  for (const [request, pattern] of nativeBad) {
    expectError(t, () => native.enqueue(request), 'invalid_argument', pattern, `native ${String(pattern)}`);
  }
  const r = await executor.generate({ inputTokenIds: cases[0]!.input_ids, maxTokens: 4, output: { excludeInputFromOutput: true } });
  t.same(r.outputTokenIds?.[0], cases[0]!.greedy_output_ids.slice(0, 4), 'still serving correctly');
  t.ok(allFree(executor));
});

t.test('a bounded queue rejects with queue_full; shutdown finishes everything', async (t) => {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1, maxQueueSize: 2, maxBatchSize: 1 });
  // One request runs (its first iteration, then the loop holds); two more wait in the queue; the fourth is refused.
  executor.holdIterations(1);
  const handles = [executor.enqueue({ inputTokenIds: cases[0]!.input_ids, maxTokens: 100 })];
  t.ok(await executor.awaitHeld(), 'the loop holds');
  let rejected: unknown;
  try {
    for (let i = 0; i < 10; i += 1) handles.push(executor.enqueue({ inputTokenIds: cases[0]!.input_ids, maxTokens: 100 }));
  } catch (error) {
    rejected = error;
  }
  t.ok(rejected instanceof TrtllmError && rejected.code === 'queue_full', 'queue_full');
  t.match((rejected as Error).message, /Maximum queue size of 2 has been reached/);
  t.equal(handles.length, 3, 'the running one and two queued were accepted');
  await executor.shutdown();
  const finals = await Promise.all(handles.map((h) => h.responses()));
  t.ok(finals.every((all) => all.at(-1)!.isFinal), 'every request got a final response');
  t.same(finals.map((all) => all.at(-1)!.finishReasons?.[0]), ['cancelled', 'cancelled', 'cancelled'], 'the running and the queued ones were cancelled');
  expectError(t, () => executor.enqueue({ inputTokenIds: [1], maxTokens: 1 }), 'shutdown', /shut down/);
});

t.test('loading errors name the problem', async (t) => {
  await expectRejection(t, Executor.load('/nonexistent/dir'), 'not_found', /\/nonexistent\/dir/);
});
