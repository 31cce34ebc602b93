// KV cache events (ExecutorConfig::kv_cache_event_buffer_max_size, kv-cache-events.h) through the executor and the
// FakeModel: `created` first; `stored` for a sequence's full blocks, chained by parent hash, carrying the blocks'
// tokens; a second prompt sharing the prefix stores only its own blocks, chained to the shared one; eviction under
// pool pressure reports exactly the evicted hashes; a full buffer drops its oldest events and counts them;
// draining empties the buffer; no events without the option or without reuse.
#include <map>

#include "check.h"
#include "executor-test-util.h"
#include "kv-cache/kv-block-hash.h"

using namespace engine;
using namespace test;

static ExecutorConfig events_config(int32_t buffer = 100, bool reuse = true) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.enable_kv_cache_reuse = reuse;
  c.kv_cache_event_buffer_max_size = buffer;
  return c;
}

static std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs one request to its end (greedy, only generated tokens returned) and returns prompt + output, the
// sequence whose full blocks the cache now holds.
static std::vector<int32_t> run_one(Harness& h, const std::vector<int32_t>& prompt, int32_t max_tokens) {
  Request r = make_request(prompt, max_tokens);
  r.output.exclude_input_from_output = true;
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  CHECK_MSG(out[id].is_final && !out[id].has_error, "request failed: %s", out[id].error_message.c_str());
  CHECK(h.executor->wait_until_idle(kWait));
  return concat(prompt, out[id].tokens);
}

static std::vector<KvCacheEvent> drain(Harness& h) {
  auto d = h.executor->get_latest_kv_cache_events();
  return std::vector<KvCacheEvent>(d.begin(), d.end());
}

// The stored blocks of `events`, in order, each with the parent hash it chains to (0 for a first block). Checks
// each event's internal chaining and that every hash is kv_block_hash(parent, tokens).
struct ChainBlock {
  uint64_t parent = 0, hash = 0;
  bool has_parent = false;
  std::vector<int32_t> tokens;
};
static std::vector<ChainBlock> stored_blocks(const std::vector<KvCacheEvent>& events, int32_t tokens_per_block) {
  std::vector<ChainBlock> out;
  for (const auto& e : events) {
    if (e.type != KvCacheEventType::stored) continue;
    CHECK(!e.blocks.empty());
    bool has_parent = e.has_parent;
    uint64_t parent = e.parent_hash;
    for (const auto& b : e.blocks) {
      CHECK(static_cast<int32_t>(b.tokens.size()) == tokens_per_block);
      const uint64_t expected =
          kv_block_hash(has_parent ? parent : kv_root_block_hash, b.tokens.data(), static_cast<int32_t>(b.tokens.size()));
      CHECK_MSG(b.block_hash == expected, "block hash %llu is not chained from its parent and tokens",
                static_cast<unsigned long long>(b.block_hash));
      out.push_back({has_parent ? parent : 0, b.block_hash, has_parent, b.tokens});
      has_parent = true;
      parent = b.block_hash;
    }
  }
  return out;
}

static void test_created_then_stored_chain() {
  Harness h(events_config());
  auto first = drain(h);
  CHECK(first.size() == 1);
  CHECK(first[0].type == KvCacheEventType::created && first[0].event_id == 0);
  CHECK(first[0].num_blocks == h.executor->kv_cache_stats().max_num_blocks && first[0].num_blocks > 0);
  CHECK(first[0].window_size == 128);  // no sliding window: max_seq_len
  CHECK(drain(h).empty());

  const auto prefix = prompt_of(12, 9);  // exactly 3 blocks
  const auto a = run_one(h, concat(prefix, prompt_of(3, 50)), 4);
  auto ev_a = drain(h);
  CHECK(!ev_a.empty());
  int64_t last_id = 0;
  for (const auto& e : ev_a) {
    CHECK_MSG(e.type == KvCacheEventType::stored, "unexpected event type %d", static_cast<int>(e.type));
    CHECK(e.event_id == last_id + 1);
    last_id = e.event_id;
  }
  const auto blocks_a = stored_blocks(ev_a, 4);
  // 15 prompt + 3 fed generated tokens were computed: 4 full blocks, the last one partly generated tokens.
  CHECK_MSG(blocks_a.size() == 4, "stored %zu blocks, expected 4", blocks_a.size());
  CHECK(!blocks_a[0].has_parent);
  for (size_t i = 0; i < blocks_a.size(); ++i) {
    CHECK(std::equal(blocks_a[i].tokens.begin(), blocks_a[i].tokens.end(), a.begin() + 4 * i));
    if (i > 0) CHECK(blocks_a[i].has_parent && blocks_a[i].parent == blocks_a[i - 1].hash);
  }

  // b shares a's 3 prefix blocks: they are attached, not stored again; b's own blocks chain to a's third.
  const auto b = run_one(h, concat(prefix, prompt_of(5, 60)), 4);
  auto ev_b = drain(h);
  CHECK(!ev_b.empty() && ev_b.front().event_id == last_id + 1);
  CHECK(ev_b.front().type == KvCacheEventType::stored && ev_b.front().has_parent);
  CHECK_MSG(ev_b.front().parent_hash == blocks_a[2].hash, "b's first stored block does not chain to a's third");
  const auto blocks_b = stored_blocks(ev_b, 4);
  CHECK_MSG(blocks_b.size() == 2, "stored %zu blocks, expected 2 (positions 12..19 of b)", blocks_b.size());
  for (size_t i = 0; i < blocks_b.size(); ++i)
    CHECK(std::equal(blocks_b[i].tokens.begin(), blocks_b[i].tokens.end(), b.begin() + 4 * (3 + i)));
  CHECK(drain(h).empty());
  CHECK(h.executor->kv_cache_events_dropped() == 0);
  CHECK(all_blocks_free(*h.executor));
}

// A 7-block pool: after a and b, six blocks are cached and one is free; c (an unrelated prompt of 6 blocks' life)
// evicts five cached ones. The removed events name exactly five distinct stored hashes, and a prompt repeating a
// reuses exactly the blocks of a's chain that were not removed.
static void test_eviction_reports_removed_hashes() {
  ExecutorConfig c = events_config();
  c.max_tokens_in_paged_kv_cache = 28;
  Harness h(c);
  const auto prefix = prompt_of(12, 3);
  const auto pa = concat(prefix, prompt_of(3, 31));
  run_one(h, pa, 4);
  run_one(h, concat(prefix, prompt_of(5, 32)), 4);
  auto before = drain(h);
  const auto stored = stored_blocks(before, 4);
  CHECK_MSG(stored.size() == 6, "stored %zu blocks, expected 6", stored.size());
  std::map<uint64_t, int> index;  // what a router would hold: hash -> position in a's chain (or -1)
  for (size_t i = 0; i < stored.size(); ++i) index[stored[i].hash] = i < 4 ? static_cast<int>(i) : -1;
  for (const auto& e : before) CHECK(e.type != KvCacheEventType::removed);

  const auto new_before = h.executor->kv_cache_stats().alloc_new_blocks;
  run_one(h, prompt_of(20, 77), 4);  // 23 positions: 6 blocks
  const int64_t taken = h.executor->kv_cache_stats().alloc_new_blocks - new_before;
  CHECK(taken == 6);
  auto ev = drain(h);
  std::vector<uint64_t> removed;
  for (const auto& e : ev)
    if (e.type == KvCacheEventType::removed) removed.insert(removed.end(), e.removed_hashes.begin(), e.removed_hashes.end());
  CHECK_MSG(removed.size() == 5, "removed %zu hashes, expected 5 (6 blocks taken, 1 never cached)", removed.size());
  for (uint64_t hsh : removed) {
    CHECK_MSG(index.count(hsh) == 1, "removed hash %llu was never stored (or removed twice)",
              static_cast<unsigned long long>(hsh));
    index.erase(hsh);
  }
  // c's own full blocks (5 of its 6) were stored after the removals made room.
  CHECK(stored_blocks(ev, 4).size() == 5);

  int expect_reuse = 0;  // a's leading chain blocks still indexed, at most its prompt's 3 full blocks
  for (size_t i = 0; i < 3; ++i) {
    if (!index.count(stored[i].hash)) break;
    ++expect_reuse;
  }
  const auto reused_before = h.executor->kv_cache_stats().reused_blocks;
  run_one(h, pa, 2);
  const auto reused = h.executor->kv_cache_stats().reused_blocks - reused_before;
  CHECK_MSG(reused == expect_reuse, "a again reused %lld blocks; the events say %d remain",
            static_cast<long long>(reused), expect_reuse);
  CHECK(all_blocks_free(*h.executor));
}

static void test_full_buffer_drops_oldest() {
  Harness h(events_config(3));
  // 4 prompt tokens and 16 generated: blocks fill one by one during decoding, one stored event each.
  run_one(h, prompt_of(4, 5), 16);
  auto ev = drain(h);
  CHECK(ev.size() == 3);
  for (size_t i = 1; i < ev.size(); ++i) CHECK(ev[i].event_id == ev[i - 1].event_id + 1);
  CHECK(ev.front().type == KvCacheEventType::stored);  // `created` was the oldest, dropped
  const int64_t total = ev.back().event_id + 1;
  CHECK_MSG(total > 3, "only %lld events recorded", static_cast<long long>(total));
  CHECK(h.executor->kv_cache_events_dropped() == total - 3);
  CHECK(drain(h).empty());
  CHECK(h.executor->kv_cache_events_dropped() == total - 3);
}

static void test_off_without_option_or_reuse() {
  for (auto c : {events_config(0, true), events_config(100, false)}) {
    Harness h(c);
    run_one(h, prompt_of(12, 9), 4);
    CHECK(drain(h).empty());
    CHECK(h.executor->kv_cache_events_dropped() == 0);
  }
  bool threw = false;
  try {
    Harness h(events_config(-1));
  } catch (const EngineError& e) {
    threw = e.code() == ErrorCode::invalid_argument &&
            std::string(e.what()).find("kv_cache_event_buffer_max_size") != std::string::npos;
  }
  CHECK(threw);
}

TEST_MAIN({
  test_created_then_stored_chain();
  test_eviction_reports_removed_hashes();
  test_full_buffer_drops_oldest();
  test_off_without_option_or_reuse();
})
