// The KV-aware router's pieces: the TypeScript block hash equals the engine's (the block_hash values a real server
// reports in its stored events for a prompt), the prefix index follows stored/removed/created events and the
// router's own notes, the choice is longest prefix, then fewest outstanding requests, then the lowest index, and
// round-robin takes the live replicas in turn.
import t from 'tap';

import type { KvCacheEvent } from '../../worker/binding/addon-types.js';
import { kvBlockHash, KV_ROOT_BLOCK_HASH, promptBlockHashes } from '../../worker/orchestrator/kv-block-hash.js';
import { chooseByCost, chooseReplica, KvPrefixIndex, nextReplica } from '../../worker/orchestrator/kv-router.js';
import { fixtureDir } from '../helpers/fixtures.js';
import { postJson, startTestServer } from '../helpers/serving.js';

const TOKENS_PER_BLOCK = 16;
const ids = (n: number, salt: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7 + salt * 13) % 200));

t.test('the TS chained hash of a prompt\'s full blocks equals the engine\'s block_hash values', async (t) => {
  const { base } = await startTestServer(t, {
    model: fixtureDir('tiny-llama'), tokensPerBlock: TOKENS_PER_BLOCK, enableKvCacheReuse: true, kvCacheEventBufferMaxSize: 100,
  });
  const prompt = ids(57, 5);  // 3 full blocks and a partial one
  const r = await postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: prompt, request_output_len: 2 });
  t.equal(r.status, 200);
  const events = await (await fetch(`${base}/kv_cache_events`, { method: 'POST' })).json() as any[];
  const engine: string[] = [];
  for (const e of events) if (e.data.type === 'stored') for (const b of e.data.blocks) engine.push(b.block_hash);
  const ours = promptBlockHashes(prompt, TOKENS_PER_BLOCK);
  t.equal(ours.length, 3, 'three full blocks');
  t.same(engine.slice(0, 3), ours, 'block for block, chained from the root');
  t.equal(kvBlockHash(KV_ROOT_BLOCK_HASH, prompt.slice(0, 16)).toString(), engine[0]);
  t.same(promptBlockHashes(prompt.slice(0, 15), TOKENS_PER_BLOCK), [], 'a partial block has no hash');
});

t.test('negative token ids hash as the engine\'s uint32 cast', async (t) => {
  t.equal(kvBlockHash(1n, [-1]), kvBlockHash(1n, [0xffffffff]));
  t.not(kvBlockHash(1n, [1, 2]), kvBlockHash(1n, [2, 1]), 'order matters');
});

t.test('the prefix index follows stored, removed and created events', async (t) => {
  const prompt = ids(48, 1);
  const [h0, h1, h2] = promptBlockHashes(prompt, TOKENS_PER_BLOCK) as [string, string, string];
  const index = new KvPrefixIndex(2);
  const stored = (hashes: string[]): KvCacheEvent => ({ eventId: 1, windowSize: 64, type: 'stored', parentHash: null, blocks: hashes.map((blockHash) => ({ blockHash, tokens: [] })) });
  index.apply(1, [stored([h0, h1, h2])]);
  index.apply(0, [stored([h0])]);
  t.same(index.matches(prompt, TOKENS_PER_BLOCK), [1, 3]);
  index.apply(1, [{ eventId: 2, windowSize: 64, type: 'removed', blockHashes: [h1] }]);
  t.same(index.matches(prompt, TOKENS_PER_BLOCK), [1, 1], 'a removed block ends the matched prefix');
  index.apply(0, [{ eventId: 0, windowSize: 64, type: 'created', numBlocks: 8 }]);
  t.same(index.matches(prompt, TOKENS_PER_BLOCK), [0, 1], 'created: a fresh cache');
  index.forget(1);
  t.same(index.matches(prompt, TOKENS_PER_BLOCK), [0, 0]);
});

t.test('the router\'s own note of a routed prompt counts at once; a later removed event corrects it', async (t) => {
  const index = new KvPrefixIndex(2);
  const hashes = promptBlockHashes(ids(40, 2), TOKENS_PER_BLOCK);  // two full blocks
  t.same(index.matchHashes(hashes), [0, 0]);
  index.add(1, hashes);
  t.same(index.matchHashes(hashes), [0, 2], 'replica 1 holds both as soon as the prompt is routed there');
  t.same(index.matches(ids(40, 2), TOKENS_PER_BLOCK), [0, 2], 'matches() hashes the same way');
  t.same(index.matchHashes([...hashes, 'x']), [0, 2], 'a longer prompt: its leading blocks');
  index.apply(1, [{ eventId: 3, windowSize: 64, type: 'removed', blockHashes: [hashes[0]!] }]);
  t.same(index.matchHashes(hashes), [0, 0], 'evicted: the prefix is gone');
});

t.test('choice: longest prefix, then fewest outstanding, then lowest index; dead replicas skipped', async (t) => {
  t.equal(chooseReplica([true, true], [0, 0], [0, 0]), 0);
  t.equal(chooseReplica([true, true], [1, 0], [0, 0]), 1);
  t.equal(chooseReplica([true, true], [0, 5], [0, 2]), 1);
  t.equal(chooseReplica([true, true], [3, 5], [2, 2]), 0);
  t.equal(chooseReplica([false, true], [0, 5], [4, 0]), 1);
  t.equal(chooseReplica([false, false], [0, 0], [0, 0]), -1);
});

t.test('round-robin: each live replica in turn, dead ones skipped', async (t) => {
  t.equal(nextReplica([true, true, true], -1), 0);
  t.equal(nextReplica([true, true, true], 0), 1);
  t.equal(nextReplica([true, true, true], 2), 0);
  t.equal(nextReplica([true, false, true], 0), 2);
  t.equal(nextReplica([false, true, false], 1), 1, 'the only live replica again');
  t.equal(nextReplica([false, false], 0), -1);
});

t.test('kv cost: uncached prompt blocks plus the new work in flight; a busy holder loses only past what its prefix saves', async (t) => {
  // A 10-block prompt, 8 of its blocks on replica 0.
  t.equal(chooseByCost([true, true], 10, [8, 0], [0, 0], [0, 0]), 0, 'idle replicas: the cached prefix wins');
  t.equal(chooseByCost([true, true], 10, [8, 0], [7, 0], [3, 0]), 0, 'busier by 7 blocks: still cheaper (2 + 7 < 10)');
  t.equal(chooseByCost([true, true], 10, [8, 0], [9, 0], [3, 0]), 1, 'busier by 9 blocks: the idle one (2 + 9 > 10)');
  t.equal(chooseByCost([true, true], 10, [8, 0], [8, 0], [1, 0]), 0, 'equal cost: the longer prefix');
  t.equal(chooseByCost([true, true], 10, [0, 0], [4, 4], [2, 1]), 1, 'equal cost and prefix: fewer in flight');
  t.equal(chooseByCost([true, true], 10, [0, 0], [4, 4], [1, 1]), 0, 'then the lowest index');
  t.equal(chooseByCost([false, true], 10, [8, 0], [0, 50], [0, 9]), 1, 'a dead replica is never chosen');
  t.equal(chooseByCost([false, false], 10, [0, 0], [0, 0], [0, 0]), -1);
});
