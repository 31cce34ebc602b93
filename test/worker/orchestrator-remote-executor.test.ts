// The orchestrator's proxy for a group's KV cache events (pure, no MPI): one ask per drain, a bounded wait, an answer
// that comes late kept for the next drain, and nothing from a group that is not ready or has died.
import t from 'tap';

import type { KvCacheEvent } from '../../worker/binding/addon-types.js';
import { RemoteExecutor } from '../../worker/orchestrator/remote-executor.js';
import { type Hello, KV_EVENTS_REPLY_MS, type KvEventsAsk, TAG } from '../../worker/orchestrator/wire.js';

const hello = { modelConfig: {}, limits: {}, ranks: [], kv: {}, loadSeconds: 0 } as unknown as Hello;
const created = (eventId: number): KvCacheEvent => ({ eventId, windowSize: 64, type: 'created', numBlocks: 8 });

function proxy(ready = () => true) {
  const asks: KvEventsAsk[] = [];
  const executor = new RemoteExecutor('m', hello, (tag, body) => { if (tag === TAG.kvEventsAsk) asks.push(body as KvEventsAsk); }, ready);
  return { executor, asks };
}

t.test('a drain asks the group and returns its answer, in order', async (t) => {
  const { executor, asks } = proxy();
  const drained = executor.getLatestKvCacheEvents();
  t.same(asks, [{ id: 1 }]);
  executor.deliverKvEvents({ id: 1, events: [created(0), created(1)] });
  t.same((await drained).map((e) => e.eventId), [0, 1]);
});

t.test('an answer later than the wait is not lost: the next drain returns it first', async (t) => {
  const { executor, asks } = proxy();
  const started = Date.now();
  t.same(await executor.getLatestKvCacheEvents(), [], 'no answer: nothing, after the bounded wait');
  t.ok(Date.now() - started >= KV_EVENTS_REPLY_MS - 50, 'it waited');
  executor.deliverKvEvents({ id: 1, events: [created(0)] });
  const next = executor.getLatestKvCacheEvents();
  executor.deliverKvEvents({ id: asks[1]!.id, events: [created(1)] });
  t.same((await next).map((e) => e.eventId), [0, 1]);
});

t.test('a group that is not ready is not asked; one that dies ends the wait with nothing', async (t) => {
  const idle = proxy(() => false);
  t.same(await idle.executor.getLatestKvCacheEvents(), []);
  t.same(idle.asks, [], 'not asked');
  const { executor } = proxy();
  executor.deliverKvEvents({ id: 0, events: [created(0)] });
  const drained = executor.getLatestKvCacheEvents();
  executor.fail('its rank 0 exited');
  // Woken by the failure itself: settled before the event loop's next turn, not by the wait's timer.
  const first = await Promise.race([drained.then(() => 'drained'), new Promise((r) => setImmediate(() => r('timer turn')))]);
  t.equal(first, 'drained', 'at once');
  t.same(await drained, [], 'a dead group contributes nothing');
  t.same(await executor.getLatestKvCacheEvents(), []);
});
