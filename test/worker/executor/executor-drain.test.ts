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

t.test('drain: a request cut at the deadline ends with the error "shutdown"; a hold through the drain stays until lifted', async (t) => {
  const executor = await Executor.load(MODEL, { tokensPerBlock: 16, numThreads: 1 });
  t.teardown(() => executor.shutdown());

  // Held through the drain: the drain's start does not lift the hold, the test does.
  executor.holdIterations(0, { throughDrain: true });
  const kept = executor.enqueue({ inputTokenIds: cases[0]!.input_ids, maxTokens: 3 });
  const drained = executor.drain(Date.now() + 3_600_000);
  t.equal(await executor.awaitHeld(), true, 'the loop still holds after the drain began');
  t.equal(executor.numActiveRequests(), 1, 'with the request queued');
  executor.holdIterations(-1);
  await drained;
  const ran = (await kept.responses()).at(-1)!;
  t.same([ran.finishReasons?.[0], ran.error], ['length', undefined], 'released, it ran to its end, no error');

  // Cut at the deadline: the final (cancelled) response carries the drain's error, so no frontend can mistake its
  // partial output for a complete answer.
  executor.holdIterations(1, { throughDrain: true });
  const cut = executor.enqueue({ inputTokenIds: cases[1]!.input_ids, maxTokens: 60, streaming: true });
  t.equal(await executor.awaitHeld(), true, 'one iteration ran');
  await executor.drain(Date.now() - 1, undefined, 'cut by the drain (test)');
  const all = await cut.responses();
  t.ok(all.length >= 2, 'a token was streamed before the cut');
  t.match(all.at(-1), { isFinal: true, finishReasons: ['cancelled'], error: { code: 'shutdown', message: 'cut by the drain (test)' } });
  await t.rejects(cut.result(), { code: 'shutdown', message: 'cut by the drain (test)' }, 'result() rejects with it');

  // Cancelled by its client (held, so the cancel lands before it can finish), a request is not the drain's: its
  // final response has no error.
  executor.holdIterations(0);
  const mine = executor.enqueue({ inputTokenIds: cases[2]!.input_ids, maxTokens: 60 });
  mine.cancel();
  const last = (await mine.responses()).at(-1)!;
  executor.holdIterations(-1);
  t.same([last.finishReasons?.[0], last.error], ['cancelled', undefined]);
});
