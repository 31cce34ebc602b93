// Executor.drain through the real addon and the tiny Llama fixture: it resolves on the last request's final
// response, and at its deadline it cancels what is left and resolves after the cancelled final responses.
import t from 'tap';

import type { NativeResponse } from '../../../worker/binding/addon-types.js';
import { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';

const MODEL = fixtureDir('tiny-llama');
const cases = referenceCases('tiny-llama');

t.test('drain: at once when idle, on the last final response, and cancelling at the deadline', async (t) => {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1 });
  t.teardown(() => executor.shutdown());
  const told: number[] = [];
  await executor.drain(Date.now() - 1, (left) => told.push(left));
  t.same(told, [], 'nothing in flight: nothing to cancel');

  // Before the deadline: both requests run to their end, and the drain resolves only after both final responses.
  const finals: NativeResponse[][] = [];
  const handles = [0, 1].map((i) => executor.enqueue({ inputTokenIds: cases[i]!.input_ids, maxTokens: 4 + i }));
  for (const h of handles) void h.responses().then((all) => finals.push(all));
  await executor.drain(Date.now() + 3_600_000, (left) => told.push(left));
  t.equal(finals.length, 2, 'every final response was delivered before the drain resolved');
  t.same(finals.map((all) => all.at(-1)!.finishReasons?.[0]).sort(), ['length', 'length'], 'they ran to their end');
  t.same(told, [], 'no deadline reached');

  // Past the deadline: held before its first iteration, it is cancelled before the drain lifts the hold.
  executor.holdIterations(0);
  const long = executor.enqueue({ inputTokenIds: cases[2]!.input_ids, maxTokens: 60 });
  let cancelledFinal: NativeResponse | undefined;
  void long.responses().then((all) => { cancelledFinal = all.at(-1); });
  await executor.drain(Date.now() - 1, (left) => told.push(left));
  t.same(told, [1], 'told how many were cancelled');
  t.equal(cancelledFinal?.finishReasons?.[0], 'cancelled', 'its final (cancelled) response came before the drain resolved');
  t.equal(cancelledFinal?.outputTokenIds?.[0]?.length, cases[2]!.input_ids.length, 'with no token generated');
  t.equal(executor.numActiveRequests(), 0, 'the engine agrees: nothing runs');
});
