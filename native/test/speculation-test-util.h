// Shared by the speculative-decoding tests (executor-speculative: prompt lookup; executor-draft-model): a model
// whose text repeats itself, the prompts, and one run of them through an executor — plain, with prompt lookup, or
// with a draft model — with what its iteration stats say about the guesses.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "check.h"
#include "executor-test-util.h"

namespace test {

// A fake model (Base: FakeModel or a subclass) that favours the token which followed the latest earlier occurrence
// of the last token (an induction head), else Base's pseudo-random one.
template <typename Base>
class Copying : public Base {
 public:
  using Base::Base;

 protected:
  int32_t target(const std::vector<int32_t>& seq, uint64_t h) const override {
    for (size_t k = seq.size() - 1; k-- > 0;)
      if (seq[k] == seq.back()) return seq[k + 1];
    return Base::target(seq, h);
  }
};
using CopyingModel = Copying<FakeModel>;

// A greedy request whose output leaves out the prompt.
inline engine::Request request(std::vector<int32_t> prompt, int32_t max_tokens, bool streaming = false) {
  engine::Request r = make_request(std::move(prompt), max_tokens, streaming);
  r.output.exclude_input_from_output = true;
  return r;
}

inline engine::ExecutorConfig config(int32_t drafts,
                                     engine::CapacitySchedulerPolicy policy = engine::CapacitySchedulerPolicy::guaranteed_no_evict,
                                     int64_t kv_tokens = 0) {
  engine::ExecutorConfig c = small_config();
  c.max_batch_size = 6;
  c.ngram_speculation.max_draft_tokens = drafts;
  c.policy = policy;
  c.max_tokens_in_paged_kv_cache = kv_tokens;
  return c;
}

// Prompts with repeats (what prompt lookup feeds on) and without.
inline std::vector<std::vector<int32_t>> prompts() {
  return {{5, 6, 7, 8, 9, 5, 6, 7}, {1, 2, 3, 1, 2, 3, 1}, prompt_of(9, 4), {10, 11, 12, 13, 14, 15, 16, 10},
          prompt_of(5, 9), {3, 3, 3, 3}};
}

struct Run {
  std::vector<Outcome> outcomes;
  int forwards = 0;
  float best_avg_decoded = 0;
  int64_t drafted = 0, accepted = 0, drafting = 0;  // the iteration stats' speculation counts, summed
};

using DraftFactory = std::function<std::unique_ptr<engine::Model>()>;

// Each prompt as a request (the odd ones streaming), plus what `extra` adds, all at once; with the draft model the
// factory makes, when given.
template <typename M>
Run run(engine::ExecutorConfig c, int32_t max_tokens, const std::vector<engine::Request>& extra = {},
        const DraftFactory& draft = nullptr) {
  Harness h(std::make_unique<M>(64, 512), c, draft ? draft() : nullptr);
  std::vector<engine::RequestId> ids;
  int k = 0;
  for (const auto& p : prompts()) ids.push_back(h.executor->enqueue(request(p, max_tokens, /*streaming=*/k++ % 2 == 1)));
  for (const engine::Request& r : extra) ids.push_back(h.executor->enqueue(r));
  auto out = h.collect(std::set<engine::RequestId>(ids.begin(), ids.end()));
  Run r;
  for (engine::RequestId id : ids) {
    CHECK_MSG(out[id].is_final && !out[id].has_error, "request %llu: %s", static_cast<unsigned long long>(id), out[id].error_message.c_str());
    r.outcomes.push_back(out[id]);
  }
  r.forwards = h.model->forward_calls.load();
  for (const auto& s : h.executor->get_latest_iteration_stats()) {
    r.best_avg_decoded = std::max(r.best_avg_decoded, s.inflight_batching_stats.avg_num_decoded_tokens_per_iter);
    r.drafted += s.spec_decoding_stats.num_draft_tokens;
    r.accepted += s.spec_decoding_stats.num_accepted_tokens;
    r.drafting += s.spec_decoding_stats.num_requests_with_draft_tokens;
  }
  CHECK(all_blocks_free(*h.executor));
  return r;
}

inline bool same_outputs(const Run& a, const Run& b) {
  if (a.outcomes.size() != b.outcomes.size()) return false;
  for (size_t i = 0; i < a.outcomes.size(); ++i)
    if (a.outcomes[i].tokens != b.outcomes[i].tokens || a.outcomes[i].reason != b.outcomes[i].reason) return false;
  return true;
}

}  // namespace test
