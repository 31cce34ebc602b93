// KV pressure: with a pool far smaller than the batch's needs, max_utilization pauses (and recomputes) requests
// yet produces exactly the unconstrained outputs; guaranteed_no_evict never pauses and still finishes everything.
#include <cmath>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

struct Workload {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> expected;
};

static Workload make_workload(const FakeModel& m) {
  Workload w;
  for (int i = 0; i < 6; ++i) {
    const auto prompt = prompt_of(6 + i, 20 + i);
    const int32_t max_tokens = 30 + 3 * i;
    Request r = make_request(prompt, max_tokens, /*streaming=*/i % 2 == 1);
    r.output.exclude_input_from_output = true;
    r.output.return_log_probs = true;
    if (i == 4) {  // a sampled one: pausing must not change its random draws either
      r.sampling.temperature = 1.0f;
      r.sampling.top_k = 8;
      r.sampling.seed = 99;
    }
    w.requests.push_back(r);
    w.expected.push_back(i == 4 ? std::vector<int32_t>{} : reference_greedy(m, prompt, max_tokens));
  }
  return w;
}

struct RunResult {
  std::vector<Outcome> outcomes;
  int paused = 0;
  int max_used = 0;
};

static RunResult run(CapacitySchedulerPolicy policy, int64_t kv_tokens) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.policy = policy;
  c.max_tokens_in_paged_kv_cache = kv_tokens;
  Harness h(c);
  Workload w = make_workload(*h.model);
  std::vector<RequestId> ids;
  for (const auto& r : w.requests) ids.push_back(h.executor->enqueue(r));
  auto out = h.collect(std::set<RequestId>(ids.begin(), ids.end()));
  RunResult res;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Outcome& o = out[ids[i]];
    res.outcomes.push_back(o);
    CHECK_MSG(o.is_final && !o.has_error, "request %zu: final %d error '%s'", i, o.is_final, o.error_message.c_str());
    if (!w.expected[i].empty()) CHECK_MSG(o.tokens == w.expected[i], "request %zu differs from greedy reference", i);
    CHECK(static_cast<int32_t>(o.tokens.size()) == w.requests[i].max_tokens);
  }
  for (const auto& s : h.executor->get_latest_iteration_stats()) {
    res.paused += s.inflight_batching_stats.num_paused_requests;
    res.max_used = std::max(res.max_used, s.kv_cache_stats.used_num_blocks);
    CHECK(s.kv_cache_stats.used_num_blocks <= s.kv_cache_stats.max_num_blocks);
  }
  CHECK(all_blocks_free(*h.executor));
  return res;
}

TEST_MAIN({
  // Unconstrained: room for everything.
  RunResult big = run(CapacitySchedulerPolicy::max_utilization, 4096);
  CHECK(big.paused == 0);
  // 64 tokens = 16 blocks; the six requests need up to 12 blocks each over their lifetime.
  RunResult mu = run(CapacitySchedulerPolicy::max_utilization, 64);
  CHECK_MSG(mu.paused > 0, "max_utilization never paused");
  CHECK(mu.max_used <= 16);
  RunResult ne = run(CapacitySchedulerPolicy::guaranteed_no_evict, 64);
  CHECK(ne.paused == 0);
  // Same tokens (and log probs) in all three runs, including the sampled request.
  for (size_t i = 0; i < big.outcomes.size(); ++i) {
    CHECK_MSG(mu.outcomes[i].tokens == big.outcomes[i].tokens, "max_utilization request %zu differs", i);
    CHECK_MSG(ne.outcomes[i].tokens == big.outcomes[i].tokens, "no_evict request %zu differs", i);
    CHECK(mu.outcomes[i].log_probs.size() == big.outcomes[i].log_probs.size());
    for (size_t j = 0; j < mu.outcomes[i].log_probs.size() && j < big.outcomes[i].log_probs.size(); ++j)
      CHECK(std::fabs(mu.outcomes[i].log_probs[j] - big.outcomes[i].log_probs[j]) < 1e-5);
  }
})
