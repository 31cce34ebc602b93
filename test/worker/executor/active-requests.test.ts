// The facade's count of requests in flight and its drain (pure, no addon): resolves on the last final response,
// cancels at the deadline, never before; turns of the event loop, not the clock, decide every assertion.
import t from 'tap';

import { ActiveRequests } from '../../../worker/executor/active-requests.js';

const FAR = () => Date.now() + 3_600_000;   // a deadline no test reaches (its timer is cleared when the drain ends)
const PAST = () => Date.now() - 1;
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function tracked(drain: Promise<void>): { done: () => boolean } {
  let done = false;
  void drain.then(() => { done = true; });
  return { done: () => done };
}

t.test('nothing active: resolves at once and cancels nothing', async (t) => {
  const active = new ActiveRequests<string>();
  const cancelled: number[] = [];
  await active.drain(PAST(), (id) => cancelled.push(id), () => t.fail('no deadline without requests'));
  t.same(cancelled, []);
});

t.test('before the deadline: resolves after the last final response, not earlier', async (t) => {
  const active = new ActiveRequests<string>();
  active.add(1, 'a');
  active.add(2, 'b');
  t.equal(active.get(2), 'b');
  const drain = tracked(active.drain(FAR(), () => t.fail('nothing is cancelled before the deadline')));
  active.finish(1);
  await turn();
  await turn();
  t.notOk(drain.done(), 'one request still runs');
  active.finish(2);
  t.notOk(drain.done(), 'not in the same turn: the final response\'s consumers run first');
  await turn();
  await turn();
  t.ok(drain.done(), 'resolved on the last final response');
  t.equal(active.size, 0);
});

t.test('a request enqueued as the last one ends keeps the drain waiting', async (t) => {
  const active = new ActiveRequests<string>();
  active.add(1, 'a');
  const drain = tracked(active.drain(FAR(), () => t.fail('no cancel')));
  active.finish(1);
  active.add(2, 'b');
  await turn();
  await turn();
  t.notOk(drain.done());
  active.finish(2);
  await turn();
  await turn();
  t.ok(drain.done());
});

t.test('past the deadline: what is left is cancelled, latecomers too, and the drain ends with their finals', async (t) => {
  const active = new ActiveRequests<string>();
  active.add(1, 'a');
  active.add(2, 'b');
  const cancelled: number[] = [];
  const told: number[] = [];
  const drain = tracked(active.drain(PAST(), (id) => cancelled.push(id), (left) => told.push(left)));
  t.same(told, [2], 'told how many are left');
  t.same(cancelled, [1, 2], 'cancelled at once');
  active.add(3, 'c');
  t.same(cancelled, [1, 2, 3], 'one enqueued after the deadline is cancelled as it arrives');
  active.finish(1);
  active.finish(2);
  await turn();
  await turn();
  t.notOk(drain.done(), 'waits for every final response');
  active.finish(3);
  await turn();
  await turn();
  t.ok(drain.done());
  active.add(4, 'd');
  t.same(cancelled, [1, 2, 3], 'after the drain, requests are no longer cancelled');
  active.finish(99);   // unknown ids are ignored
  t.equal(active.size, 1);
});
