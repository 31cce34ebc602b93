// KvCacheManager: allocation grows tables block by block, release returns everything, exhaustion is
// all-or-nothing, stats count what was handed out.
#include "check.h"
#include "kv-cache/kv-cache.h"

using engine::BlockTable;
using engine::KvCacheManager;

static void test_allocate_and_free() {
  KvCacheManager kv(8, 4);
  CHECK(kv.num_blocks() == 8);
  CHECK(kv.num_free_blocks() == 8);
  CHECK(kv.blocks_for_tokens(0) == 0);
  CHECK(kv.blocks_for_tokens(1) == 1);
  CHECK(kv.blocks_for_tokens(4) == 1);
  CHECK(kv.blocks_for_tokens(5) == 2);

  BlockTable a, b;
  CHECK(kv.ensure_capacity(a, 5));  // 2 blocks
  CHECK(a.size() == 2);
  CHECK(kv.ensure_capacity(a, 8));  // still 2
  CHECK(a.size() == 2);
  CHECK(kv.ensure_capacity(a, 9));  // 3
  CHECK(a.size() == 3);
  CHECK(kv.ensure_capacity(b, 4));
  CHECK(b.size() == 1);
  // Distinct ids, all in range.
  CHECK(a[0] != a[1] && a[1] != a[2] && a[0] != a[2]);
  for (int32_t id : a) CHECK(id != b[0] && id >= 0 && id < 8);
  CHECK(a[0] == 0 && a[1] == 1 && a[2] == 2 && b[0] == 3);  // deterministic low-ids-first order

  auto s = kv.stats();
  CHECK(s.max_num_blocks == 8);
  CHECK(s.used_num_blocks == 4);
  CHECK(s.free_num_blocks == 4);
  CHECK(s.tokens_per_block == 4);
  CHECK(s.alloc_total_blocks == 4);
  CHECK(s.alloc_new_blocks == 4);

  kv.release(a);
  CHECK(a.empty());
  CHECK(kv.num_free_blocks() == 7);
  kv.release(b);
  CHECK(kv.num_free_blocks() == 8);
  CHECK(kv.stats().used_num_blocks == 0);
  CHECK(kv.stats().alloc_total_blocks == 4);  // cumulative

  // Freed blocks are reused, lowest first again.
  BlockTable c;
  CHECK(kv.ensure_capacity(c, 1));
  CHECK(c[0] == 3);  // the most recently freed block (b's) is handed out first
  kv.release(c);
}

static void test_exhaustion_is_all_or_nothing() {
  KvCacheManager kv(3, 2);
  BlockTable a, b;
  CHECK(kv.ensure_capacity(a, 4));   // 2 blocks
  CHECK(!kv.ensure_capacity(b, 3));  // needs 2, 1 free: refused
  CHECK(b.empty());
  CHECK(kv.num_free_blocks() == 1);
  CHECK(kv.ensure_capacity(b, 2));
  CHECK(kv.num_free_blocks() == 0);
  CHECK(!kv.ensure_capacity(a, 5));
  CHECK(a.size() == 2);
  kv.release(a);
  CHECK(kv.ensure_capacity(b, 6));
  CHECK(b.size() == 3);
  kv.release(b);
  CHECK(kv.num_free_blocks() == 3);
}

static void test_double_release_is_an_error() {
  KvCacheManager kv(2, 2);
  BlockTable a;
  CHECK(kv.ensure_capacity(a, 1));
  BlockTable copy = a;
  kv.release(a);
  CHECK_THROWS(kv.release(copy), "not in use");
}

TEST_MAIN({
  test_allocate_and_free();
  test_exhaustion_is_all_or_nothing();
  test_double_release_is_an_error();
})
