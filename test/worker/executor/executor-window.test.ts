// max_attention_window_size through the real addon (tiny-llama, full attention of its own): the server's window and
// a request's window give the same tokens, which differ from unwindowed ones; a request whose prompt + max tokens
// need more KV blocks than the whole pool runs to the end when windowed (its blocks before the window go back to
// the pool), and is refused, naming the blocks, when not. The engine's tests show the windowed tokens equal a run
// that keeps every block and only masks (native/test/executor-window.cpp).
import t from 'tap';

import type { NativeRequest } from '../../../worker/binding/addon-types.js';
import { Executor, type ExecutorOptions } from '../../../worker/executor/executor.js';
import { fixtureDir } from '../../helpers/fixtures.js';

const MODEL = fixtureDir('tiny-llama');
// 12 blocks of 4 tokens: a 20-token prompt + 60 tokens needs 20 without a window.
const SMALL_POOL: ExecutorOptions = { tokensPerBlock: 4, maxTokensInPagedKvCache: 48, maxSeqLen: 128, numThreads: 2 };
const prompt = Array.from({ length: 20 }, (_, i) => 3 + ((37 + i * 11) % 250));

async function load(t: { teardown(fn: () => unknown): void }, options: ExecutorOptions): Promise<Executor> {
  const executor = await Executor.load(MODEL, options);
  t.teardown(() => executor.shutdown());
  return executor;
}

const request = (extra: Partial<NativeRequest> = {}): NativeRequest => ({
  inputTokenIds: prompt, maxTokens: 60, endId: -1, output: { excludeInputFromOutput: true }, ...extra,
});

t.test('server window = request window, both past a pool too small for the whole sequence', async (t) => {
  const server = await load(t, { ...SMALL_POOL, maxAttentionWindow: 6 });
  const byServer = (await server.generate(request())).outputTokenIds?.[0] ?? [];
  t.equal(byServer.length, 60, '60 tokens with 12 blocks');
  const s = server.kvCacheStats();
  t.equal(s.freeNumBlocks, s.maxNumBlocks, 'every block back');

  const perRequest = await load(t, SMALL_POOL);
  const byRequest = (await perRequest.generate(request({ maxAttentionWindow: 6 }))).outputTokenIds?.[0] ?? [];
  t.same(byRequest, byServer, 'a request window of 6 = a server window of 6');
  // The request's window narrows the server's; a wider one leaves it.
  const wider = (await server.generate(request({ maxAttentionWindow: 50 }))).outputTokenIds?.[0] ?? [];
  t.same(wider, byServer, 'a request window wider than the server\'s: the server\'s');

  await t.rejects(perRequest.generate(request()), /need 20 KV blocks but the KV cache has only 12 blocks/,
    'unwindowed, the same request cannot fit');
  const big = await load(t, { ...SMALL_POOL, maxTokensInPagedKvCache: 512 });
  const unwindowed = (await big.generate(request())).outputTokenIds?.[0] ?? [];
  t.equal(unwindowed.length, 60);
  t.not(JSON.stringify(unwindowed), JSON.stringify(byServer), 'the window changes the tokens');
});

t.test('bad windows: the server option and the request field named with the value', async (t) => {
  await t.rejects(Executor.load(MODEL, { ...SMALL_POOL, maxAttentionWindow: -1 }),
    /max_attention_window must be >= 0 \(0: the model's own windows\), got -1/);
  const executor = await load(t, SMALL_POOL);
  await t.rejects(executor.generate(request({ maxAttentionWindow: -3 })),
    /maxAttentionWindow|max_attention_window_size must be >= 1 \(or 0: the server's\), got -3/);
  const s = executor.kvCacheStats();
  t.equal(s.freeNumBlocks, s.maxNumBlocks, 'nothing held after the refusals');
});
