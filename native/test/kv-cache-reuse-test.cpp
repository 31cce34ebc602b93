// KvCacheManager with prefix reuse, without an executor: full blocks are registered by content, a matching
// prompt attaches them, released ones stay cached (and count as free) until the free list runs out, eviction is
// least-recently-released first, and a block whose prefix differs anywhere earlier is never matched.
#include "check.h"
#include "kv-cache/kv-block-hash.h"
#include "kv-cache/kv-cache.h"

using engine::BlockTable;
using engine::KvCacheManager;
using engine::TokenIds;

static TokenIds seq(int32_t n, int32_t salt) {
  TokenIds t;
  for (int32_t i = 0; i < n; ++i) t.push_back((i * 5 + salt) % 50);
  return t;
}

static void test_hash_chains_the_prefix() {
  const TokenIds a = {1, 2, 3, 4};
  const TokenIds b = {1, 2, 3, 5};
  CHECK(engine::kv_block_hash(7, a.data(), 4) == engine::kv_block_hash(7, a.data(), 4));
  CHECK(engine::kv_block_hash(7, a.data(), 4) != engine::kv_block_hash(8, a.data(), 4));  // parent matters
  CHECK(engine::kv_block_hash(7, a.data(), 4) != engine::kv_block_hash(7, b.data(), 4));
  CHECK(engine::kv_block_hash(7, a.data(), 4) != engine::kv_block_hash(7, a.data(), 3));
}

static void test_register_attach_release() {
  KvCacheManager kv(8, 4, /*enable_reuse=*/true);
  const TokenIds t = seq(14, 3);  // 3 full blocks + 2 tokens
  BlockTable a;
  CHECK(kv.ensure_capacity(a, 14));
  CHECK(a.size() == 4);
  // Nothing registered before the K/V are written.
  CHECK(kv.probe_prefix(t, 13, nullptr) == 0);
  kv.commit_full_blocks(a, t, 10);  // blocks 0 and 1 full
  int32_t in_use = -1;
  CHECK(kv.probe_prefix(t, 13, &in_use) == 8);
  CHECK(in_use == 2);  // a holds them
  kv.commit_full_blocks(a, t, 14);  // block 2 full too; block 3 partial
  CHECK(kv.probe_prefix(t, 13, &in_use) == 12 && in_use == 3);
  // max_tokens rounds down to whole blocks: a 12-token prompt may take only 11 -> 2 blocks.
  CHECK(kv.probe_prefix(TokenIds(t.begin(), t.begin() + 12), 11, nullptr) == 8);

  // A second sequence shares the 3 blocks while a still holds them: nothing taken from the pool.
  BlockTable b;
  CHECK(kv.attach_prefix(b, t, 13) == 12);
  CHECK(b.size() == 3 && b[0] == a[0] && b[1] == a[1] && b[2] == a[2]);
  CHECK(kv.num_free_blocks() == 4);
  auto s = kv.stats();
  CHECK(s.reused_blocks == 3 && s.alloc_new_blocks == 4 && s.alloc_total_blocks == 7);
  CHECK(kv.ensure_capacity(b, 16));  // its own partial block
  CHECK(b.size() == 4 && b[3] != a[3]);

  // Releasing both: the 3 registered blocks stay cached but count as free; the partial ones go back to the list.
  kv.release(a);
  kv.release(b);
  CHECK(kv.num_free_blocks() == 8 && kv.num_used_blocks() == 0);
  CHECK(kv.probe_prefix(t, 13, &in_use) == 12 && in_use == 0);
  // A prompt differing in the first block matches nothing, even with identical later blocks.
  TokenIds other = t;
  other[0] = 49;
  CHECK(kv.probe_prefix(other, 13, nullptr) == 0);
  // One differing token in block 1: only block 0 matches.
  other = t;
  other[5] = 49;
  CHECK(kv.probe_prefix(other, 13, nullptr) == 4);
}

static void test_lru_eviction_only_when_free_list_is_empty() {
  KvCacheManager kv(6, 2, /*enable_reuse=*/true);
  const TokenIds x = seq(4, 1), y = seq(4, 2);
  BlockTable a, b;
  CHECK(kv.ensure_capacity(a, 4));
  kv.commit_full_blocks(a, x, 4);
  kv.release(a);  // x's 2 blocks cached (released first: oldest)
  CHECK(kv.ensure_capacity(b, 4));
  kv.commit_full_blocks(b, y, 4);
  kv.release(b);  // y's 2 blocks cached
  CHECK(kv.num_free_blocks() == 6);
  // Two fresh blocks come from the untouched free list: both prefixes survive.
  BlockTable c;
  CHECK(kv.ensure_capacity(c, 4));
  CHECK(kv.probe_prefix(x, 4, nullptr) == 4 && kv.probe_prefix(y, 4, nullptr) == 4);
  // The free list is empty now: the next block evicts the least recently released one. a was released in reverse
  // (its second block first), so x's second block goes first and x keeps a 1-block prefix.
  CHECK(kv.ensure_capacity(c, 6));
  CHECK(kv.probe_prefix(x, 4, nullptr) == 2);
  CHECK(kv.probe_prefix(y, 4, nullptr) == 4);
  CHECK(kv.ensure_capacity(c, 8));
  CHECK(kv.probe_prefix(x, 4, nullptr) == 0);
  // Attaching y's cached blocks takes them out of the LRU: now nothing is free.
  BlockTable d;
  CHECK(kv.attach_prefix(d, y, 4) == 4);
  CHECK(kv.num_free_blocks() == 0);
  CHECK(!kv.ensure_capacity(d, 6));  // all-or-nothing, nothing evictable
  kv.release(c);
  kv.release(d);
  CHECK(kv.num_free_blocks() == 6);
  CHECK(kv.stats().reused_blocks == 2);
}

static void test_duplicate_prefix_and_reuse_off() {
  // Two sequences compute the same prompt side by side: the first registered block wins and is the one matched;
  // the twin is freed normally when released.
  KvCacheManager kv(4, 2, /*enable_reuse=*/true);
  const TokenIds t = seq(2, 4);
  BlockTable a, b;
  CHECK(kv.ensure_capacity(a, 2) && kv.ensure_capacity(b, 2));
  kv.commit_full_blocks(a, t, 2);
  kv.commit_full_blocks(b, t, 2);
  BlockTable m;
  CHECK(kv.attach_prefix(m, t, 2) == 2 && m[0] == a[0]);
  kv.release(m);
  kv.release(a);  // cached
  kv.release(b);  // duplicate: back to the free list, content forgotten
  CHECK(kv.num_free_blocks() == 4);
  CHECK(kv.probe_prefix(t, 2, nullptr) == 2);

  KvCacheManager off(4, 2);
  BlockTable c;
  CHECK(off.ensure_capacity(c, 2));
  off.commit_full_blocks(c, t, 2);
  off.release(c);
  CHECK(off.probe_prefix(t, 2, nullptr) == 0);
  CHECK(off.attach_prefix(c, t, 2) == 0 && c.empty());
  CHECK(off.stats().reused_blocks == 0);
}

TEST_MAIN({
  test_hash_chains_the_prefix();
  test_register_attach_release();
  test_lru_eviction_only_when_free_list_is_empty();
  test_duplicate_prefix_and_reuse_off();
})
