// The tokenizer pool (worker/tokenizer-pool.ts) against the fixtures' real tokenizers: the threads' ids and texts
// are the main thread's, a request's slices take turns with others', an abandoned job is dropped, the test hold
// holds a slice inside its thread, and a pool that cannot load says why.
import t from 'tap';

import { TrtllmError } from '../../worker/common/errors.js';
import { TokenizeAborted, TokenizerPool } from '../../worker/tokenizer-pool.js';
import { loadTokenizer } from '../../worker/tokenizer.js';
import { fixtureDir } from '../helpers/fixtures.js';

const DIR = fixtureDir('tiny-llama');
const TEXTS = ['What is machine learning?', 'hello world', '日本語 😀 and spaces   ', 'What is machine learning?'];

async function openPool(t: { teardown(fn: () => unknown): void }, size = 1): Promise<TokenizerPool> {
  const pool = new TokenizerPool(DIR, size);
  t.teardown(() => pool.close());
  await pool.ready();
  return pool;
}

t.test('ids and texts are the main thread tokenizer\'s; a text over its limit comes back as its count', async (t) => {
  const pool = await openPool(t, 2);
  const tok = loadTokenizer(DIR);
  const encoded = await pool.encode(TEXTS.map((text, i) => ({ text, addSpecialTokens: i % 2 === 0 })));
  t.same(encoded, TEXTS.map((text, i) => ({ ids: tok.encode(text, { addSpecialTokens: i % 2 === 0 }) })));
  const long = 'machine learning '.repeat(100);
  const count = tok.encode(long).length;
  t.same(await pool.encode([{ text: long, addSpecialTokens: true, limit: count - 1 }, { text: long, addSpecialTokens: true, limit: count }]),
    [{ count }, { ids: tok.encode(long) }], 'one token over the limit: the count; at the limit: the ids');
  const ids = TEXTS.map((text) => tok.encode(text));
  t.same(await pool.decode(ids), ids.map((i) => tok.decode(i)));
  t.same(await pool.encode([]), [], 'nothing to do');
});

t.test('a request with many slices takes turns: a small request after it is answered before it', async (t) => {
  const pool = await openPool(t, 1);
  const order: string[] = [];
  // Each text fills a slice: the big job is five slices, the small one one. One thread runs them in turn.
  const big = pool.encode(Array.from({ length: 5 }, (_, i) => ({ text: `${i} ${'x'.repeat(32 * 1024)}`, addSpecialTokens: true })))
    .then(() => order.push('big'));
  const small = pool.encode([{ text: 'hello', addSpecialTokens: true }]).then(() => order.push('small'));
  await Promise.all([big, small]);
  t.same(order, ['small', 'big']);
});

t.test('an abandoned job is dropped; the others are answered', async (t) => {
  const pool = await openPool(t, 1);
  pool.holdTasks();
  const first = pool.encode([{ text: 'first', addSpecialTokens: true }]);
  await pool.awaitHeldTask();
  const aborter = new AbortController();
  const dropped = pool.encode([{ text: 'dropped', addSpecialTokens: true }], aborter.signal).then(() => 'answered', (e: unknown) => e);
  aborter.abort();
  t.ok(await dropped instanceof TokenizeAborted, 'rejected at once, while the thread still holds the first');
  pool.releaseTasks();
  t.same((await first).length, 1);
  const aborted = AbortSignal.abort();
  t.ok(await pool.encode([{ text: 'late', addSpecialTokens: true }], aborted).catch((e: unknown) => e) instanceof TokenizeAborted, 'already abandoned: not started');
  await pool.settled(Date.now() + 60_000);
  t.pass('settled once nothing is left');
});

t.test('the test hold: a slice waits inside its thread until released', async (t) => {
  const pool = await openPool(t, 1);
  pool.holdTasks();
  let answered = false;
  const job = pool.encode([{ text: 'held', addSpecialTokens: true }]).then((r) => { answered = true; return r; });
  await pool.awaitHeldTask();
  // The thread has the text and is blocked: the main thread runs on.
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(answered, false, 'not answered while held');
  pool.releaseTasks();
  t.same(await job, [{ ids: loadTokenizer(DIR).encode('held') }]);
});

t.test('a thread that dies fails only the slice it held, and a new thread takes its place', async (t) => {
  const pool = await openPool(t, 1);
  pool.holdTasks();
  const lost = pool.encode([{ text: 'lost', addSpecialTokens: true }]).catch((e: unknown) => e);
  await pool.awaitHeldTask();
  // The pool's only thread, killed while it holds the slice (what an out-of-memory thread would look like).
  await (pool as unknown as { threads: { worker: { terminate(): Promise<number> } }[] }).threads[0]!.worker.terminate();
  const error = await lost;
  t.ok(error instanceof TrtllmError && error.code === 'internal', 'the job it held fails');
  t.match((error as Error).message, /a tokenizer thread exited/);
  pool.releaseTasks();
  t.same(await pool.encode([{ text: 'next', addSpecialTokens: true }]), [{ ids: loadTokenizer(DIR).encode('next') }], 'the next job is served');
});

t.test('a closed pool and a pool that cannot load fail with the reason', async (t) => {
  const pool = new TokenizerPool(DIR, 1);
  await pool.ready();
  await pool.close();
  const closed = await pool.encode([{ text: 'a', addSpecialTokens: true }]).catch((e: unknown) => e);
  t.ok(closed instanceof TrtllmError && closed.code === 'shutdown', 'closed: shutdown');
  const broken = new TokenizerPool('/nonexistent-model', 1);
  t.teardown(() => broken.close());
  const failed = await broken.ready().catch((e: unknown) => e);
  t.ok(failed instanceof TrtllmError && failed.code === 'bad_checkpoint');
  t.match((failed as Error).message, /could not load \/nonexistent-model: .*tokenizer\.json is missing/);
  t.equal(await broken.encode([{ text: 'a', addSpecialTokens: true }]).catch((e: unknown) => e), failed, 'every job fails with it');
  t.throws(() => new TokenizerPool(DIR, 0), /Expected the tokenizer pool's "size" to be an integer >= 1, got 0/);
});
