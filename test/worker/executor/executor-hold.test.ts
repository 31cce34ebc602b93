// The executor's test hook through the addon: holdIterations / awaitHeld hold the native loop where a test needs
// it, so the order of events is fixed instead of timed; awaitHeld resolves after the held iterations' responses.
import t from 'tap';

import type { NativeResponse } from '../../../worker/binding/addon-types.js';
import { Executor } from '../../../worker/executor/executor.js';
import { expectError } from '../../helpers/expect-error.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';

const MODEL = fixtureDir('tiny-llama');
const cases = referenceCases('tiny-llama');

t.test('held: nothing runs until released; one iteration gives one token; a cancel goes before the next', async (t) => {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1 });
  t.teardown(() => executor.shutdown());
  const c = cases[1]!;
  const seen: NativeResponse[] = [];
  executor.onResponses((batch) => seen.push(...batch));

  executor.holdIterations(0);
  t.equal(await executor.awaitHeld(), true, 'held before anything was enqueued');
  const handle = executor.enqueue({ inputTokenIds: c.input_ids, maxTokens: 20, streaming: true });
  t.equal(await executor.awaitHeld(), true, 'still held after the enqueue');
  t.same(seen, [], 'no response while held');

  executor.holdIterations(1);
  t.equal(await executor.awaitHeld(), true);
  t.equal(seen.length, 1, 'one iteration: one streamed response, delivered before awaitHeld resolved');
  t.same(seen[0]!.outputTokenIds?.[0], c.greedy_output_ids.slice(0, 1));

  handle.cancel();
  executor.holdIterations(-1);
  const all = await handle.responses();
  t.equal(all.at(-1)!.finishReasons?.[0], 'cancelled');
  t.same(all.flatMap((r) => r.outputTokenIds?.[0] ?? []), c.greedy_output_ids.slice(0, 1), 'no token after the cancel');
});

t.test('awaitHeld: false when the loop does not hold in time or is shut down; arguments are checked', async (t) => {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1 });
  executor.holdIterations(1);
  t.equal(await executor.awaitHeld(0), false, 'allowed an iteration but idle: not held');
  expectError(t, () => executor.holdIterations(1.5), 'invalid_argument', /"n" to be an integer, got 1\.5/);
  expectError(t, () => executor.awaitHeld(-1), 'invalid_argument', /"timeoutMs" to be a non-negative number/);
  executor.holdIterations(0);
  const handle = executor.enqueue({ inputTokenIds: cases[0]!.input_ids, maxTokens: 8 });
  await executor.shutdown();
  t.equal((await handle.responses()).at(-1)!.finishReasons?.[0], 'cancelled', 'shutdown while held cancels');
});
