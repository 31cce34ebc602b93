// POST /kv_cache_events through a real server on tiny-llama: trtllm-serve's JSON list of KV cache events (created,
// stored with the prompt's tokens per full block and a consistent parent chain, a shared prefix stored once), drained
// on read; [] with the option off; the option's bad values and its need for --enable-kv-cache-reuse refused.
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { startServer } from '../../../worker/serve.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { postJson, startTestServer } from '../../helpers/serving.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const TOKENS_PER_BLOCK = 16;
const ids = (n: number, salt: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7 + salt * 13) % 200));

async function generate(base: string, inputIds: number[]): Promise<void> {
  const r = await postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: inputIds, request_output_len: 2 });
  if (r.status !== 200) throw new Error(`generate: ${r.status} ${JSON.stringify(r.json)}`);
}

async function drain(base: string, method: 'GET' | 'POST' = 'POST'): Promise<any[]> {
  const res = await fetch(`${base}/kv_cache_events`, { method });
  if (res.status !== 200) throw new Error(`/kv_cache_events: ${res.status} ${await res.text()}`);
  return await res.json() as any[];
}

// The stored blocks of `events` in order, each with the parent hash it chains to.
function storedBlocks(events: any[]): { parent: string | null; hash: string; tokens: number[] }[] {
  const out: { parent: string | null; hash: string; tokens: number[] }[] = [];
  for (const e of events) {
    if (e.data.type !== 'stored') continue;
    let parent: string | null = e.data.parent_hash;
    for (const b of e.data.blocks) {
      out.push({ parent, hash: b.block_hash, tokens: b.tokens.map((tok: any) => tok.token_id) });
      parent = b.block_hash;
    }
  }
  return out;
}

t.test('created + stored events for a prompt, a shared prefix chained to blocks seen before, drained on read', async (t) => {
  const { base } = await startTestServer(t, {
    model: fixtureDir('tiny-llama'), tokensPerBlock: TOKENS_PER_BLOCK, enableKvCacheReuse: true, kvCacheEventBufferMaxSize: 100,
  });
  const prefix = ids(32, 1);
  const a = [...prefix, ...ids(8, 2)];
  await generate(base, a);
  const first = await drain(base);
  t.same(first[0], { event_id: 0, data: { type: 'created', num_blocks_per_cache_level: [first[0].data.num_blocks_per_cache_level[0]] }, window_size: first[0].window_size });
  t.ok(first[0].data.num_blocks_per_cache_level[0] > 0 && first[0].window_size > 0, 'the pool size and window');
  first.forEach((e, i) => t.equal(e.event_id, i, 'event ids count up from 0'));
  const stored = first.filter((e) => e.data.type === 'stored');
  t.ok(stored.length > 0);
  t.match(stored[0].data.blocks[0], { type: 'stored_block', block_hash: /^\d+$/, lora_id: null, cache_level: 0, priority: 35 });
  t.same(stored[0].data.blocks[0].tokens[0], { type: 'unique_token', token_id: a[0], token_extra_id: 0 });
  const blocksA = storedBlocks(first);
  // 40 prompt tokens + 1 fed generated one: two full blocks, both of the prompt.
  t.equal(blocksA.length, 2, 'two full blocks stored');
  t.equal(blocksA[0]!.parent, null, 'the first block has no parent');
  t.equal(blocksA[1]!.parent, blocksA[0]!.hash, 'the second chains to the first');
  blocksA.forEach((b, i) => t.same(b.tokens, a.slice(i * TOKENS_PER_BLOCK, (i + 1) * TOKENS_PER_BLOCK), `block ${i} holds the prompt's tokens`));
  t.same(await drain(base), [], 'drained: the second read is empty');

  const b = [...prefix, ...ids(20, 3)];
  await generate(base, b);
  const second = await drain(base, 'GET');
  t.ok(second.length > 0 && second[0].event_id === first.at(-1).event_id + 1, 'ids continue');
  const blocksB = storedBlocks(second);
  t.equal(blocksB.length, 1, 'only the block after the shared prefix is stored (52 + 1 positions: 3 full blocks, 2 attached)');
  t.equal(blocksB[0]!.parent, blocksA[1]!.hash, 'its parent_hash is a block_hash seen before');
  t.same(blocksB[0]!.tokens, b.slice(32, 48));
  const known = new Set(blocksA.map((x) => x.hash));
  for (const blk of blocksB) {
    t.ok(blk.parent === null || known.has(blk.parent), 'every parent is known to a router replaying the events');
    known.add(blk.hash);
  }
  t.same(await drain(base, 'POST'), []);
});

t.test('with the option off the endpoint answers []', async (t) => {
  const { base } = await startTestServer(t, { model: fixtureDir('tiny-llama'), tokensPerBlock: TOKENS_PER_BLOCK, enableKvCacheReuse: true });
  await generate(base, ids(40, 4));
  t.same(await drain(base), []);
  t.same(await drain(base, 'GET'), []);
});

t.test('bad values name the flag and value; events without reuse are refused naming both options', async (t) => {
  for (const bad of ['-1', 'x', '2147483648']) {
    const r = await execa('node', [bin, '--kv-cache-event-buffer-max-size', bad, '--model', fixtureDir('tiny-llama')], { reject: false });
    t.not(r.exitCode, 0);
    t.match(r.stderr, `--kv-cache-event-buffer-max-size must be an integer in [0, 2147483647], got "${bad}"`);
  }
  const env = await execa('node', [bin, '--model', fixtureDir('tiny-llama'), '--dry-run'], { reject: false, env: { TRTLLM_KV_CACHE_EVENT_BUFFER_MAX_SIZE: '-3' } });
  t.match(env.stderr, /--kv-cache-event-buffer-max-size must be an integer in \[0, 2147483647\], got "-3"/, 'the env fallback');
  const without = await execa('node', [bin, '--model', fixtureDir('tiny-llama'), '--kv-cache-event-buffer-max-size', '8', '--dry-run'], { reject: false });
  t.equal(without.exitCode, 2);
  t.match(without.stderr, /--kv-cache-event-buffer-max-size 8 needs --enable-kv-cache-reuse/);
  await t.rejects(startServer({
    model: fixtureDir('tiny-llama'), host: '127.0.0.1', httpPort: 0, metricsPort: 0, authHealth: false, authMetrics: false,
    maxBodyBytes: 1024, drainTimeoutMs: 1000, logLevel: 'error', threads: 1, kvCacheEventBufferMaxSize: 8,
  }), { code: 'invalid_argument', message: /--kv-cache-event-buffer-max-size 8 needs --enable-kv-cache-reuse/ }, 'a rank refuses it too');
});
