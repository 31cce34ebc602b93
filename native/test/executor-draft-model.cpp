// Speculation by draft model (Executor's `draft`, ExecutorConfig::draft_model_tokens): outputs equal the plain
// executor's token for token whatever the draft guesses — a draft that is the model itself (every guess kept, which
// also shows its own K/V stays in step: a stale or misplaced slot would change its guesses or throw), one that is
// always wrong, one right half the time, one whose favourites include ids the model lacks (its argmax is taken over the
// ids both have) — greedy and seeded sampled, streaming,
// stop words, end_id, max_tokens; prompts longer than a pass (the draft catches up over several); pauses under a
// small KV pool; a cancel between passes; a draft that throws; per-request num_draft_tokens; bad configs. Both
// pools end with every block free.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "speculation-test-util.h"

using namespace engine;
using namespace test;

namespace {

// A draft whose guess is the FakeModel's choice shifted by `shift` where (h >> 7) % period != 0 (shift 0: always
// right; period 1: never right).
class ShiftedDraft : public FakeModel {
 public:
  ShiftedDraft(int32_t vocab, int32_t shift, uint64_t period, int32_t extra_vocab = 0)
      : FakeModel(vocab + extra_vocab), vocab_(vocab), shift_(shift), period_(period) {}

 protected:
  int32_t target(const std::vector<int32_t>& seq, uint64_t h) const override {
    const auto model = static_cast<int32_t>(mix(h) % static_cast<uint64_t>(vocab_));
    if (shift_ == 0 || (period_ > 1 && (h >> 7) % period_ == 0)) return model;
    (void)seq;
    return (model + shift_) % (vocab_ + extra());
  }

 private:
  int32_t extra() const { return config().vocab_size - vocab_; }
  int32_t vocab_, shift_;
  uint64_t period_;
};

ExecutorConfig draft_config(int32_t tokens) {
  ExecutorConfig c = config(0);
  c.draft_model_tokens = tokens;
  return c;
}

DraftFactory same_model() { return [] { return std::make_unique<FakeModel>(64, 512); }; }
DraftFactory shifted(int32_t shift, uint64_t period, int32_t extra_vocab = 0) {
  return [=] { return std::make_unique<ShiftedDraft>(64, shift, period, extra_vocab); };
}

}  // namespace

TEST_MAIN({
  // Every draft gives the plain outputs; the model itself as the draft has every guess kept, in far fewer passes.
  for (int32_t max_tokens : {1, 5, 40}) {
    const Run plain = run<FakeModel>(config(0), max_tokens);
    for (int32_t k : {1, 4}) {
      const Run same = run<FakeModel>(draft_config(k), max_tokens, {}, same_model());
      CHECK_MSG(same_outputs(plain, same), "same-model draft, max_tokens %d, k %d", max_tokens, k);
      CHECK_MSG(same.accepted == same.drafted, "same-model draft: %lld of %lld guesses kept",
                static_cast<long long>(same.accepted), static_cast<long long>(same.drafted));
      const Run wrong = run<FakeModel>(draft_config(k), max_tokens, {}, shifted(1, 1));
      CHECK_MSG(same_outputs(plain, wrong), "wrong draft, max_tokens %d, k %d", max_tokens, k);
      CHECK(wrong.accepted == 0);
      const Run half = run<FakeModel>(draft_config(k), max_tokens, {}, shifted(3, 2));
      CHECK_MSG(same_outputs(plain, half), "half-right draft, max_tokens %d, k %d", max_tokens, k);
      const Run foreign = run<FakeModel>(draft_config(k), max_tokens, {}, shifted(63, 1, 8));
      CHECK_MSG(same_outputs(plain, foreign), "draft with ids past the model's vocabulary, max_tokens %d", max_tokens);
      if (max_tokens == 40) {
        CHECK_MSG(same.drafted > 0 && same.forwards * (k == 1 ? 3 : 2) < plain.forwards * 2,
                  "passes: %d with the model as its own draft (k %d), %d without", same.forwards, k, plain.forwards);
        CHECK(same.best_avg_decoded >= static_cast<float>(k));
        CHECK_MSG(half.accepted > 0 && half.accepted < half.drafted, "half-right draft: %lld of %lld kept",
                  static_cast<long long>(half.accepted), static_cast<long long>(half.drafted));
        CHECK(wrong.drafted > 0 && foreign.drafted > 0);
      }
    }
  }
  // Seeded sampled requests draw the plain tokens (each checked row is drawn as the plain step draws it).
  {
    std::vector<Request> sampled;
    for (uint64_t seed : {4, 5}) {
      Request r = request({5, 6, 7, 5, 6}, 16);
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = seed;
      sampled.push_back(r);
    }
    const Run plain = run<FakeModel>(config(0), 16, sampled), spec = run<FakeModel>(draft_config(3), 16, sampled, same_model());
    CHECK(same_outputs(plain, spec));
  }
  // end_id and stop words end the output where the plain executor does, also when a guess ran past them.
  {
    auto with_stops = [](const DraftFactory& draft) {
      Harness h(std::make_unique<CopyingModel>(64, 512), draft_config(6), draft ? draft() : nullptr);
      Request a = request({5, 6, 7, 8, 9, 5, 6, 7}, 30);
      a.end_id = 9;
      Request b = request({1, 2, 3, 4, 1, 2, 3, 4, 1}, 30, /*streaming=*/true);
      b.stop_words = {{3, 4, 1}};
      const RequestId ia = h.executor->enqueue(a), ib = h.executor->enqueue(b);
      auto out = h.collect({ia, ib});
      CHECK(all_blocks_free(*h.executor));
      return std::vector<Outcome>{out[ia], out[ib]};
    };
    const auto plain = with_stops(nullptr);
    const auto spec = with_stops([] { return std::make_unique<CopyingModel>(64, 512); });
    for (size_t k = 0; k < plain.size(); ++k)
      CHECK_MSG(plain[k].tokens == spec[k].tokens && plain[k].reason == spec[k].reason, "request %zu", k);
    CHECK(spec[0].reason == FinishReason::end_id && spec[1].reason == FinishReason::stop_words);
  }
  // Prompts longer than a pass: chunked context for the model, several catch-up passes for the draft — still every
  // guess of the model-as-draft kept.
  {
    auto long_prompts = [](const DraftFactory& draft) {
      ExecutorConfig c = draft_config(3);
      c.max_num_tokens = 8;
      c.enable_chunked_context = true;
      Harness h(std::make_unique<FakeModel>(64, 512), c, draft ? draft() : nullptr);
      std::set<RequestId> ids;
      for (int32_t salt = 0; salt < 3; ++salt) ids.insert(h.executor->enqueue(request(prompt_of(21 + salt, salt), 12)));
      auto out = h.collect(ids);
      int64_t drafted = 0, accepted = 0;
      for (const auto& s : h.executor->get_latest_iteration_stats())
        drafted += s.spec_decoding_stats.num_draft_tokens, accepted += s.spec_decoding_stats.num_accepted_tokens;
      CHECK(all_blocks_free(*h.executor));
      std::vector<TokenIds> tokens;
      for (RequestId id : ids) tokens.push_back(out[id].tokens);
      return std::make_tuple(tokens, drafted, accepted);
    };
    const auto [plain, d0, a0] = long_prompts(nullptr);
    const auto [spec, d1, a1] = long_prompts(same_model());
    CHECK(plain == spec && d0 == 0);
    CHECK_MSG(d1 > 0 && a1 == d1, "%lld of %lld guesses kept", static_cast<long long>(a1), static_cast<long long>(d1));
  }
  // A small KV pool: pauses free the draft's blocks too, and a resumed request's draft starts over.
  for (auto policy : {CapacitySchedulerPolicy::guaranteed_no_evict, CapacitySchedulerPolicy::max_utilization}) {
    ExecutorConfig c = draft_config(4);
    c.policy = policy;
    c.max_tokens_in_paged_kv_cache = 96;
    ExecutorConfig p = config(0, policy, 96);
    CHECK_MSG(same_outputs(run<FakeModel>(p, 24), run<FakeModel>(c, 24, {}, shifted(5, 3))), "policy %d", static_cast<int>(policy));
  }
  // A request's num_draft_tokens: 0 turns the draft off for it.
  {
    Request off = request({1, 2, 3}, 20);
    off.num_draft_tokens = 0;
    ExecutorConfig c = draft_config(4);
    c.max_batch_size = 1;
    Harness h(std::make_unique<FakeModel>(64, 512), c, same_model()());
    const RequestId id = h.executor->enqueue(off);
    auto out = h.collect({id});
    int64_t drafted = 0;
    for (const auto& s : h.executor->get_latest_iteration_stats()) drafted += s.spec_decoding_stats.num_draft_tokens;
    CHECK(out[id].tokens.size() == 20 && drafted == 0);
    CHECK(all_blocks_free(*h.executor));
  }
  // A cancel between passes frees both pools' blocks; the other request goes on.
  {
    Harness h(std::make_unique<FakeModel>(64, 512), draft_config(3), same_model()());
    const RequestId a = h.executor->enqueue(request({5, 6, 7, 8}, 200, /*streaming=*/true));
    const RequestId b = h.executor->enqueue(request({1, 2}, 20));
    h.executor->hold_iterations(3);
    CHECK(h.executor->wait_until_held(kWait));
    CHECK(h.executor->draft_kv_cache_stats().used_num_blocks > 0);
    h.executor->cancel(a);
    h.executor->hold_iterations(-1);
    auto out = h.collect({a, b});
    CHECK(out[a].reason == FinishReason::cancelled && out[b].tokens.size() == 20);
    CHECK(all_blocks_free(*h.executor));
  }
  // A draft that throws: that step runs without guesses, the outputs stay the plain ones.
  {
    const Run plain = run<FakeModel>(config(0), 20);
    const Run spec = run<FakeModel>(draft_config(3), 20, {}, [] {
      auto d = std::make_unique<FakeModel>(64, 512);
      d->fail_on_call = 4;
      return d;
    });
    CHECK(same_outputs(plain, spec) && spec.drafted > 0);
  }
  // Bad configs name the field and the value.
  {
    auto refused = [](ExecutorConfig c, std::unique_ptr<Model> draft, const std::string& words) {
      try {
        Harness h(std::make_unique<FakeModel>(64, 512), c, std::move(draft));
      } catch (const EngineError& e) {
        CHECK_MSG(std::string(e.what()).find(words) != std::string::npos, "'%s' lacks '%s'", e.what(), words.c_str());
        return;
      }
      CHECK_MSG(false, "no error for '%s'", words.c_str());
    };
    refused(draft_config(0), same_model()(), "draft_model_tokens must be in [1, 64], got 0");
    refused(draft_config(65), same_model()(), "draft_model_tokens must be in [1, 64], got 65");
    refused(draft_config(4), std::make_unique<FakeModel>(64 + 5000, 512),
            "the draft model's vocab_size 5064 is far from the model's 64; a draft model must share the model's tokenizer");
  }
})
