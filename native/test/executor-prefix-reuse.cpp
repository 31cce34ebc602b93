// Prefix reuse (enable_kv_cache_reuse) through the executor and the FakeModel, whose logits hash the whole KV
// prefix read back from the blocks: attaching a wrong or stale block changes the tokens. Outputs with reuse on
// equal those with reuse off; a shared 3-block prefix is attached, not recomputed; shared blocks count once for
// guaranteed_no_evict; eviction, cancellation and pausing leave the cache consistent and every block free.
#include <thread>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

static ExecutorConfig base_config(bool reuse) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.enable_kv_cache_reuse = reuse;
  return c;
}

static std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every request here returns only the generated tokens, streaming or not, so outputs compare to the reference.
static Request req(std::vector<int32_t> prompt, int32_t max_tokens, bool streaming = false) {
  Request r = make_request(std::move(prompt), max_tokens, streaming);
  r.output.exclude_input_from_output = true;
  return r;
}

// Enqueues every request, waits for all, returns outcomes in request order.
static std::vector<Outcome> run_all(Harness& h, const std::vector<Request>& requests) {
  std::vector<RequestId> ids;
  for (const Request& r : requests) ids.push_back(h.executor->enqueue(r));
  auto out = h.collect(std::set<RequestId>(ids.begin(), ids.end()));
  std::vector<Outcome> res;
  for (RequestId id : ids) {
    const Outcome& o = out[id];
    CHECK_MSG(o.is_final && !o.has_error, "request %llu: final %d error '%s'", static_cast<unsigned long long>(id),
              o.is_final, o.error_message.c_str());
    res.push_back(o);
  }
  return res;
}

static int64_t sum_ctx_tokens(const std::deque<IterationStats>& stats) {
  int64_t n = 0;
  for (const auto& s : stats) n += s.inflight_batching_stats.num_ctx_tokens;
  return n;
}

static void test_outputs_identical_with_and_without_reuse() {
  const auto prefix = prompt_of(12, 5);
  std::vector<Request> wave1, wave2;
  for (int i = 0; i < 3; ++i) wave1.push_back(req(concat(prefix, prompt_of(3 + i, 30 + i)), 10 + i, i == 1));
  for (int i = 0; i < 5; ++i) wave2.push_back(req(concat(prefix, prompt_of(2 + i, 40 + i)), 8 + 2 * i, i % 2 == 0));
  wave2.push_back(wave1[0]);                        // the same prompt again: 3 of its 4 blocks reusable
  wave2.push_back(req(prefix, 9));          // block-aligned: its last block must still be computed
  Request sampled = req(concat(prefix, prompt_of(5, 77)), 12);
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.top_k = 8;
  sampled.sampling.seed = 7;
  sampled.output.return_log_probs = true;
  wave2.push_back(sampled);
  Request logits = req(concat(prefix, prompt_of(3, 30)), 6);
  logits.output.return_context_logits = true;
  logits.output.return_generation_logits = true;
  wave2.push_back(logits);

  std::vector<std::vector<Outcome>> runs;
  std::vector<KvCacheStats> kv;
  for (bool reuse : {false, true}) {
    Harness h(base_config(reuse));
    auto a = run_all(h, wave1);
    auto b = run_all(h, wave2);
    a.insert(a.end(), b.begin(), b.end());
    runs.push_back(a);
    kv.push_back(h.executor->kv_cache_stats());
    CHECK(all_blocks_free(*h.executor));
    std::vector<Request> all = wave1;
    all.insert(all.end(), wave2.begin(), wave2.end());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].sampling.temperature > 0) continue;
      const auto& p = all[i].input_token_ids;
      CHECK_MSG(a[i].tokens == reference_greedy(*h.model, p, all[i].max_tokens),
                "reuse %d: request %zu differs from the greedy reference", reuse, i);
    }
  }
  CHECK(kv[0].reused_blocks == 0);
  CHECK_MSG(kv[1].reused_blocks > 0, "reuse on never reused a block");
  CHECK(kv[1].alloc_new_blocks < kv[0].alloc_new_blocks);
  CHECK(kv[1].alloc_total_blocks == kv[1].alloc_new_blocks + kv[1].reused_blocks);
  for (size_t i = 0; i < runs[0].size(); ++i) {
    CHECK_MSG(runs[0][i].tokens == runs[1][i].tokens, "request %zu: reuse changed the output", i);
    CHECK(runs[0][i].log_probs == runs[1][i].log_probs);
    CHECK(runs[0][i].last.result.context_logits == runs[1][i].last.result.context_logits);
    CHECK(runs[0][i].last.result.generation_logits == runs[1][i].last.result.generation_logits);
  }
  CHECK(runs[1].back().last.result.context_logits.size() == logits.input_token_ids.size() * 64);
}

static void test_second_request_reuses_three_blocks() {
  Harness h(base_config(true));
  const auto prefix = prompt_of(12, 9);  // exactly 3 blocks
  const auto a = concat(prefix, prompt_of(3, 50));
  const auto b = concat(prefix, prompt_of(5, 60));
  run_all(h, {req(a, 4)});
  const auto before = h.executor->kv_cache_stats();
  auto first_stats = h.executor->get_latest_iteration_stats();
  CHECK(sum_ctx_tokens(first_stats) == 15);  // a computed its whole prompt
  CHECK(before.reused_blocks == 0);

  auto out = run_all(h, {req(b, 4)});
  CHECK(out[0].tokens == reference_greedy(*h.model, b, 4));
  const auto after = h.executor->kv_cache_stats();
  CHECK_MSG(after.reused_blocks - before.reused_blocks == 3, "reused %lld blocks, expected 3",
            static_cast<long long>(after.reused_blocks - before.reused_blocks));
  CHECK(after.alloc_total_blocks - before.alloc_total_blocks == 5);  // 17 + 3 fed tokens = 20 positions
  CHECK(after.alloc_new_blocks - before.alloc_new_blocks == 2);
  auto stats = h.executor->get_latest_iteration_stats();
  CHECK_MSG(sum_ctx_tokens(stats) == 5, "b computed %lld context tokens, expected 17 - 12 = 5",
            static_cast<long long>(sum_ctx_tokens(stats)));
  bool stats_show_reuse = false;
  for (const auto& s : stats) stats_show_reuse |= s.kv_cache_stats.reused_blocks == after.reused_blocks;
  CHECK(stats_show_reuse);
  CHECK(all_blocks_free(*h.executor));
}

// guaranteed_no_evict: a running request's prefix blocks, shared by a newcomer, are counted once. The pool (7
// blocks) holds both 5-block lifetimes only when the 3 shared blocks are not counted twice.
static void test_shared_blocks_count_once_for_no_evict() {
  for (bool reuse : {false, true}) {
    ExecutorConfig c = base_config(reuse);
    c.max_tokens_in_paged_kv_cache = 28;
    Harness h(c);
    const auto prefix = prompt_of(12, 3);
    Request a = req(concat(prefix, {1}), 7, /*streaming=*/true);
    Request b = req(concat(prefix, {2}), 7);
    // b arrives after a's first iteration: a's prompt blocks are written and registered by then, and a still runs.
    h.executor->hold_iterations(1);
    const RequestId ia = h.executor->enqueue(a);
    CHECK(h.executor->wait_until_held(kWait));
    const RequestId ib = h.executor->enqueue(b);
    h.executor->hold_iterations(-1);
    auto out = h.collect({ia, ib});
    CHECK(out[ib].tokens == reference_greedy(*h.model, b.input_token_ids, 7));
    int together = 0;
    for (const auto& s : h.executor->get_latest_iteration_stats()) {
      together += s.inflight_batching_stats.num_scheduled_requests == 2;
      CHECK(s.kv_cache_stats.used_num_blocks <= 7);
    }
    if (reuse) CHECK_MSG(together > 0, "b never ran next to a: shared blocks counted twice?");
    else CHECK_MSG(together == 0, "without reuse the pool cannot hold both");
    CHECK(all_blocks_free(*h.executor));
  }
}

// A pool far smaller than the prefixes seen: cached blocks are evicted (least recently released first) to make
// room, and outputs stay exact under both policies.
static void test_eviction_under_pressure() {
  for (auto policy : {CapacitySchedulerPolicy::max_utilization, CapacitySchedulerPolicy::guaranteed_no_evict}) {
    ExecutorConfig c = base_config(true);
    c.policy = policy;
    c.max_tokens_in_paged_kv_cache = 64;  // 16 blocks
    Harness h(c);
    int64_t reused = 0;
    for (int wave = 0; wave < 4; ++wave) {
      std::vector<Request> rs;
      for (int f = 0; f < 4; ++f) {
        // Families 0..5 of 8-token prefixes; each wave touches 4 of them, so older ones get evicted and recomputed.
        const auto prefix = prompt_of(8, 100 + (wave + f) % 6);
        rs.push_back(req(concat(prefix, prompt_of(1 + f, 200 + wave)), 6 + f, f == 2));
      }
      auto out = run_all(h, rs);
      for (size_t i = 0; i < rs.size(); ++i) {
        const auto& p = rs[i].input_token_ids;
        CHECK_MSG(out[i].tokens == reference_greedy(*h.model, p, rs[i].max_tokens),
                  "policy %d wave %d request %zu differs", static_cast<int>(policy), wave, i);
      }
      const auto s = h.executor->kv_cache_stats();
      CHECK(s.free_num_blocks == s.max_num_blocks && s.used_num_blocks == 0);
      reused = s.reused_blocks;
    }
    CHECK_MSG(reused > 0, "policy %d: nothing reused", static_cast<int>(policy));
    const auto s = h.executor->kv_cache_stats();
    CHECK_MSG(s.alloc_new_blocks > s.max_num_blocks, "the pool never had to recycle blocks");
  }
}

// Cancelling and pausing requests that share prefix blocks: the others still produce the reference, and at the
// end every block is free (cached ones count as free) and nothing is in use.
static void test_cancel_and_pause_with_shared_blocks() {
  ExecutorConfig c = base_config(true);
  c.policy = CapacitySchedulerPolicy::max_utilization;
  c.max_tokens_in_paged_kv_cache = 48;  // 12 blocks: forces pauses
  Harness h(c);
  const auto prefix = prompt_of(8, 11);
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(req(concat(prefix, prompt_of(1 + i % 3, 70 + i)), 20 + 2 * i, true));
  std::vector<RequestId> ids;
  // Cancel 1 and 4 after two iterations (they hold or share prefix blocks by then).
  h.executor->hold_iterations(0);
  for (const auto& r : rs) ids.push_back(h.executor->enqueue(r));
  h.executor->hold_iterations(2);
  CHECK(h.executor->wait_until_held(kWait));
  std::map<RequestId, Outcome> out;
  for (auto& r : h.executor->await_responses(std::chrono::milliseconds(0))) Harness::absorb(out, std::move(r));
  CHECK(out.size() >= 2);
  h.executor->cancel(ids[1]);
  h.executor->cancel(ids[4]);
  h.executor->hold_iterations(-1);
  std::set<RequestId> pending;
  for (RequestId id : ids)
    if (!out[id].is_final) pending.insert(id);
  for (auto& kv : h.collect(pending)) {
    Outcome& o = out[kv.first];
    o.tokens.insert(o.tokens.end(), kv.second.tokens.begin(), kv.second.tokens.end());
    o.reason = kv.second.reason;
    o.is_final = kv.second.is_final;
    o.has_error = o.has_error || kv.second.has_error;
  }
  for (RequestId id : ids) CHECK(out[id].is_final);
  int paused = 0;
  for (const auto& s : h.executor->get_latest_iteration_stats()) paused += s.inflight_batching_stats.num_paused_requests;
  CHECK_MSG(paused > 0, "the pool never forced a pause");
  for (size_t i = 0; i < ids.size(); ++i) {
    const Outcome& o = out[ids[i]];
    CHECK(o.is_final && !o.has_error);
    const auto ref = reference_greedy(*h.model, rs[i].input_token_ids, rs[i].max_tokens);
    if (i == 1 || i == 4) {
      CHECK(o.reason == FinishReason::cancelled || o.reason == FinishReason::length);
      CHECK(std::equal(o.tokens.begin(), o.tokens.end(), ref.begin()));  // a prefix of the reference
    } else {
      CHECK_MSG(o.tokens == ref, "request %zu differs after pauses/cancels", i);
    }
  }
  CHECK(all_blocks_free(*h.executor));
  // The cache is still consistent: the same prompts again give the same outputs and reuse the prefix.
  const auto before = h.executor->kv_cache_stats().reused_blocks;
  rs[0].streaming = false;
  auto again = run_all(h, {rs[0]});
  CHECK(again[0].tokens == reference_greedy(*h.model, rs[0].input_token_ids, rs[0].max_tokens));
  CHECK(h.executor->kv_cache_stats().reused_blocks > before);
  CHECK(all_blocks_free(*h.executor));
}

// return_context_logits needs a row for every prompt token: such a request does not skip its cached prefix (its
// context logits equal a run without reuse); the same prompt without context logits then reuses.
static void test_context_logits_requests_compute_everything() {
  const auto prompt = concat(prompt_of(12, 21), prompt_of(3, 22));
  Request plain = req(prompt, 5);
  Request logits = plain;
  logits.output.return_context_logits = true;
  std::vector<float> reference_rows;
  {
    Harness h(base_config(false));
    reference_rows = run_all(h, {logits})[0].last.result.context_logits;
  }
  Harness h(base_config(true));
  run_all(h, {plain});
  h.executor->get_latest_iteration_stats();
  const auto before = h.executor->kv_cache_stats().reused_blocks;
  auto out = run_all(h, {logits});
  CHECK(out[0].last.result.context_logits.size() == prompt.size() * 64);
  CHECK(out[0].last.result.context_logits == reference_rows);
  CHECK(h.executor->kv_cache_stats().reused_blocks == before);
  CHECK(sum_ctx_tokens(h.executor->get_latest_iteration_stats()) == 15);
  run_all(h, {plain});
  CHECK(h.executor->kv_cache_stats().reused_blocks == before + 3);
  CHECK(all_blocks_free(*h.executor));
}

TEST_MAIN({
  test_outputs_identical_with_and_without_reuse();
  test_second_request_reuses_three_blocks();
  test_shared_blocks_count_once_for_no_evict();
  test_eviction_under_pressure();
  test_cancel_and_pause_with_shared_blocks();
  test_context_logits_requests_compute_everything();
})
