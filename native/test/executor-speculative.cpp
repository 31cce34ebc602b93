// Speculative decoding by prompt lookup through the executor (ExecutorConfig::ngram_speculation): greedy outputs
// equal the plain executor's token for token — over the FakeModel (whose choices its own text rarely predicts) and
// over a model that continues by copying (whose choices it mostly does, so the same outputs take fewer passes) —
// with streaming, stop words, end_id, max_tokens, a cancel between passes, a small KV pool under both policies;
// seeded sampled requests draw the same tokens too, and a chi-square test checks a checked row's draws against the
// model's distribution. Iteration stats count the tokens a pass gained.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "check.h"
#include "device-sampling-fake-model.h"
#include "speculation-test-util.h"
#include "sampling/ngram-draft.h"

using namespace engine;
using namespace test;

// The copying model as a model that samples on its device.
using CopyingDeviceModel = Copying<DeviceSamplingFakeModel>;


TEST_MAIN({
  // The drafter: the tokens after the latest earlier occurrence of the longest matching suffix (up to max_ngram).
  {
    using V = std::vector<int32_t>;
    CHECK(ngram_draft({1, 2, 3, 9, 1, 2, 3, 7, 1, 2}, 3, 4) == (V{3, 7, 1, 2}));  // "1 2" last seen before 3 7
    CHECK(ngram_draft({4, 5, 6, 4, 5, 8, 5}, 3, 2) == (V{8, 5}));                 // only "5" matches: latest one
    CHECK(ngram_draft({4, 5, 6, 4, 5, 8, 4, 5}, 1, 3) == (V{8, 4, 5}));           // n = 1: the latest 5
    CHECK(ngram_draft({4, 5, 6, 4, 5, 8, 4, 5}, 2, 3) == (V{8, 4, 5}));           // n = 2: the latest "4 5"
    CHECK(ngram_draft({1, 2, 3}, 3, 4).empty());                                  // nothing repeats
    CHECK(ngram_draft({7}, 3, 4).empty() && ngram_draft({}, 3, 4).empty());
    CHECK(ngram_draft({3, 3, 3}, 3, 5) == (V{3}));                                // "3 3" at 0: one token follows
    CHECK(ngram_draft({1, 2, 1, 2}, 3, 0).empty());
  }
  // The same outputs with and without guesses, for both models and several draft lengths; the copying model's
  // guesses hold, so it needs fewer passes and some iteration gains several tokens per request.
  for (int32_t max_tokens : {1, 2, 7, 40}) {
    const Run plain = run<FakeModel>(config(0), max_tokens), copy_plain = run<CopyingModel>(config(0), max_tokens);
    for (int32_t drafts : {1, 3, 8}) {
      const Run spec = run<FakeModel>(config(drafts), max_tokens);
      CHECK_MSG(same_outputs(plain, spec), "fake model, max_tokens %d, drafts %d", max_tokens, drafts);
      const Run copy_spec = run<CopyingModel>(config(drafts), max_tokens);
      CHECK_MSG(same_outputs(copy_plain, copy_spec), "copying model, max_tokens %d, drafts %d", max_tokens, drafts);
      for (const Outcome& o : copy_spec.outcomes) CHECK(static_cast<int32_t>(o.tokens.size()) == max_tokens);
      if (max_tokens == 40) {
        // (the batch runs as long as its slowest request, which repeats nothing it could guess from)
        CHECK_MSG(drafts == 1 ? copy_spec.forwards < copy_plain.forwards : copy_spec.forwards * 3 < copy_plain.forwards * 2,
                  "passes: %d with %d guesses, %d without", copy_spec.forwards, drafts, copy_plain.forwards);
        CHECK_MSG(copy_spec.best_avg_decoded > 1.5f, "best avg decoded tokens per iteration: %.2f", copy_spec.best_avg_decoded);
        CHECK(copy_plain.best_avg_decoded == 1.0f);
        CHECK(copy_plain.drafted == 0 && copy_plain.accepted == 0 && copy_plain.drafting == 0);
        CHECK_MSG(copy_spec.drafting > 0 && copy_spec.drafted >= copy_spec.drafting && copy_spec.accepted > 0 &&
                      copy_spec.accepted <= copy_spec.drafted && copy_spec.drafted <= copy_spec.drafting * drafts,
                  "guesses %lld in %lld steps, %lld kept", static_cast<long long>(copy_spec.drafted),
                  static_cast<long long>(copy_spec.drafting), static_cast<long long>(copy_spec.accepted));
      }
    }
  }
  // end_id and stop words end the output where the plain executor does, also when the guess ran past them.
  {
    auto with_stops = [](int32_t drafts) {
      Harness h(std::make_unique<CopyingModel>(64, 512), config(drafts));
      Request a = request({5, 6, 7, 8, 9, 5, 6, 7}, 30);
      a.end_id = 9;
      Request b = request({1, 2, 3, 4, 1, 2, 3, 4, 1}, 30, /*streaming=*/true);
      b.stop_words = {{3, 4, 1}};
      Request c = request({20, 21, 22, 20, 21}, 30);
      c.stop_words = {{22, 20, 21, 22}};
      const RequestId ia = h.executor->enqueue(a), ib = h.executor->enqueue(b), ic = h.executor->enqueue(c);
      auto out = h.collect({ia, ib, ic});
      CHECK(all_blocks_free(*h.executor));
      return std::vector<Outcome>{out[ia], out[ib], out[ic]};
    };
    const auto plain = with_stops(0), spec = with_stops(6);
    for (size_t k = 0; k < plain.size(); ++k)
      CHECK_MSG(plain[k].tokens == spec[k].tokens && plain[k].reason == spec[k].reason, "request %zu", k);
    CHECK(spec[0].reason == FinishReason::end_id && spec[0].tokens == (std::vector<int32_t>{8}));
    CHECK(spec[1].reason == FinishReason::stop_words && spec[1].tokens == (std::vector<int32_t>{2, 3, 4, 1}));
    CHECK(spec[2].reason == FinishReason::stop_words);
  }
  // Sampled requests speculate too and draw the plain requests' tokens (the draw of step s depends on the seed and
  // s alone), next to greedy ones; with top-k, top-p and a penalty as well.
  {
    std::vector<Request> sampled;
    for (uint64_t seed : {1, 2, 3}) {
      Request r = request({5, 6, 7, 5, 6}, 12);
      r.sampling.temperature = seed == 3 ? 0.7f : 1.0f;
      r.sampling.top_p = seed == 2 ? 0.9f : 1.0f;
      if (seed == 3) r.sampling.top_k = 5, r.sampling.repetition_penalty = 1.2f;
      r.sampling.seed = seed;
      sampled.push_back(r);
    }
    const Run plain = run<CopyingModel>(config(0), 12, sampled), spec = run<CopyingModel>(config(4), 12, sampled);
    CHECK(same_outputs(plain, spec));
    CHECK(spec.accepted > 0);
  }
  // The distribution of a token drawn from a checked row is the model's: over 6000 seeds, the third token of the
  // requests whose first token was the model's favourite x and whose second was the guess g after it (so the third
  // came from the pass's row after the guess) against the model's softmax after prompt + x + g (chi-square, 7
  // degrees of freedom, p = 0.001: 24.3), and far from the row before the guess (the test can tell rows apart).
  {
    ExecutorConfig c = config(1);
    c.max_batch_size = 64;
    c.max_num_tokens = 1024;
    c.speculation_max_batch = 0;  // (guesses at any batch size)
    Harness h(std::make_unique<CopyingModel>(8, 512), c);
    const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 3, 1};
    std::vector<int32_t> before_guess = prompt;
    before_guess.push_back(h.model->expected_next(prompt));
    const int32_t guess = ngram_draft(before_guess, 3, 1).at(0);
    std::set<RequestId> ids;
    for (uint64_t seed = 0; seed < 6000; ++seed) {
      Request r = request(prompt, 3);
      r.sampling.temperature = 1.0f;
      r.sampling.top_p = 1.0f;
      r.sampling.seed = seed;
      ids.insert(h.executor->enqueue(r));
    }
    auto out = h.collect(ids);
    std::vector<double> counts(8, 0.0);
    double n = 0;
    for (auto& [id, o] : out)
      if (o.tokens.size() == 3 && o.tokens[0] == before_guess.back() && o.tokens[1] == guess)
        counts[static_cast<size_t>(o.tokens[2])] += 1, n += 1;
    auto chi2 = [&](std::vector<int32_t> seq) {
      const std::vector<float> row = h.model->row_for(seq);
      double z = 0, x = 0;
      for (float l : row) z += std::exp(static_cast<double>(l));
      for (size_t t = 0; t < row.size(); ++t) {
        const double e = n * std::exp(static_cast<double>(row[t])) / z;
        x += (counts[t] - e) * (counts[t] - e) / e;
      }
      return x;
    };
    std::vector<int32_t> after_guess = before_guess;
    after_guess.push_back(guess);
    const double fit = chi2(after_guess), other = chi2(before_guess);
    CHECK_MSG(n > 1000 && fit < 24.3 && other > 100, "%.0f draws: chi-square %.1f against the row after the guess, %.1f against the one before", n, fit, other);
    int64_t accepted = 0;
    for (const auto& s : h.executor->get_latest_iteration_stats()) accepted += s.spec_decoding_stats.num_accepted_tokens;
    CHECK(accepted > 0);
    CHECK(all_blocks_free(*h.executor));
  }
  // A request's num_draft_tokens: 0 turns guessing off for it, a number turns it on where the executor's default
  // is off, and caps it where it is on; the tokens stay the plain ones. Out of range: refused at enqueue.
  {
    auto one = [](int32_t server, int32_t asked) {
      Harness h(std::make_unique<CopyingModel>(64, 512), config(server));
      Request r = request({1, 2, 3, 4, 1, 2, 3, 4, 1}, 30);
      r.num_draft_tokens = asked;
      const RequestId id = h.executor->enqueue(r);
      auto out = h.collect({id});
      int64_t drafted = 0, most = 0;
      for (const auto& st : h.executor->get_latest_iteration_stats()) {
        drafted += st.spec_decoding_stats.num_draft_tokens;
        most = std::max(most, st.spec_decoding_stats.num_draft_tokens);
      }
      return std::make_tuple(out[id].tokens, drafted, most);
    };
    const auto [plain, d0, m0] = one(0, -1);
    CHECK(d0 == 0);
    const auto [off, d1, m1] = one(6, 0);
    CHECK(off == plain && d1 == 0);
    const auto [on, d2, m2] = one(0, 3);
    CHECK_MSG(on == plain && d2 > 0 && m2 == 3, "drafted %lld, at most %lld a step", static_cast<long long>(d2), static_cast<long long>(m2));
    const auto [capped, d3, m3] = one(6, 2);
    CHECK_MSG(capped == plain && d3 > 0 && m3 == 2, "drafted %lld, at most %lld a step", static_cast<long long>(d3), static_cast<long long>(m3));
    Harness h(config(2));
    for (int32_t bad : {-2, kMaxDraftTokens + 1}) {
      Request r = request({1, 2, 3}, 4);
      r.num_draft_tokens = bad;
      bool threw = false;
      try {
        h.executor->enqueue(r);
      } catch (const EngineError& e) {
        threw = e.code() == ErrorCode::invalid_argument &&
                std::string(e.what()) == "num_draft_tokens must be in [0, 64] (or -1: the server's), got " + std::to_string(bad);
      }
      CHECK_MSG(threw, "num_draft_tokens %d", bad);
    }
    for (int32_t bad : {-1, kMaxDraftTokens + 1}) {
      bool threw = false;
      try {
        Harness bad_config(config(bad));
      } catch (const EngineError& e) {
        threw = std::string(e.what()).find("ngram_speculation.max_draft_tokens must be in [0, 64], got " + std::to_string(bad)) != std::string::npos;
      }
      CHECK_MSG(threw, "max_draft_tokens %d", bad);
    }
  }
  // A model that samples on its device draws every checked row there — a greedy request's argmaxes, a sampled one's
  // draws of step, step + 1, ... — so nothing comes back to the host. The same outputs either way.
  {
    struct Counts { int argmax = 0, drawn = 0, host = 0; };
    auto on_device = [](int32_t drafts, Counts& n) {
      Request r = request({5, 6, 7, 5, 6}, 12);
      r.sampling.temperature = 1.0f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 3;
      Harness h(std::make_unique<CopyingDeviceModel>(64, 512), config(drafts));
      std::vector<RequestId> ids;
      for (const auto& p : prompts()) ids.push_back(h.executor->enqueue(request(p, 30)));
      ids.push_back(h.executor->enqueue(r));
      auto out = h.collect(std::set<RequestId>(ids.begin(), ids.end()));
      auto* m = dynamic_cast<DeviceSamplingFakeModel*>(h.model);
      n = Counts{m->argmax_row_chunks.load(), m->drawn_row_chunks.load(), m->host_rows.load()};
      CHECK(all_blocks_free(*h.executor));
      std::vector<TokenIds> tokens;
      for (RequestId id : ids) tokens.push_back(out[id].tokens);
      return tokens;
    };
    Counts plain_n, spec_n;
    const auto plain = on_device(0, plain_n), spec = on_device(4, spec_n);
    CHECK(plain == spec);
    CHECK_MSG(plain_n.argmax == 0 && plain_n.drawn == 0 && spec_n.argmax > 0 && spec_n.drawn > 0,
              "checked chunks drawn on the device: %d argmax + %d sampled speculating", spec_n.argmax, spec_n.drawn);
    CHECK_MSG(spec_n.host == 0 && plain_n.host == 0, "chunks whose rows came back: %d", spec_n.host);
  }
  // speculation_max_batch: no guesses in an iteration with more requests decoding; guesses again once fewer are.
  {
    ExecutorConfig c = config(4);
    c.speculation_max_batch = 2;
    Harness h(std::make_unique<CopyingModel>(64, 512), c);
    std::set<RequestId> ids;
    int32_t len = 4;
    for (const auto& p : prompts()) ids.insert(h.executor->enqueue(request(p, len))), len += 6;
    auto out = h.collect(ids);
    int64_t crowded_guesses = 0, sparse_guesses = 0;
    for (const auto& st : h.executor->get_latest_iteration_stats())
      (st.inflight_batching_stats.num_gen_requests > 2 ? crowded_guesses : sparse_guesses) += st.spec_decoding_stats.num_draft_tokens;
    CHECK_MSG(crowded_guesses == 0 && sparse_guesses > 0, "guesses with more than 2 decoding: %lld, with 2 or fewer: %lld",
              static_cast<long long>(crowded_guesses), static_cast<long long>(sparse_guesses));
    const Run plain = run<CopyingModel>(config(0), 30);
    ExecutorConfig off = config(4);
    off.speculation_max_batch = 2;
    CHECK(same_outputs(plain, run<CopyingModel>(off, 30)));
  }
  // On a device model, the checked rows of a request the device cannot draw (here: bad words, a host-only logits
  // processor) come back to the host: at most 16 MiB of them an iteration. With 1M-id rows (4 MiB each), one request
  // may have 3 guesses (4 rows), and a second none in the same pass.
  {
    ExecutorConfig c = config(6);
    c.max_batch_size = 2;
    Harness h(std::make_unique<CopyingDeviceModel>(1 << 20, 512), c);
    std::set<RequestId> ids;
    for (uint64_t seed : {1, 2}) {
      Request r = request({5, 6, 7, 5, 6, 7, 5}, 6);
      r.sampling.temperature = 0.01f;  // (as good as greedy, but drawn by the sampler)
      r.sampling.top_p = 1.0f;
      r.sampling.seed = seed;
      r.bad_words = {{63}};
      ids.insert(h.executor->enqueue(r));
    }
    auto out = h.collect(ids);
    int64_t most = 0, requests_most = 0;
    for (const auto& st : h.executor->get_latest_iteration_stats()) {
      most = std::max(most, st.spec_decoding_stats.num_draft_tokens);
      requests_most = std::max<int64_t>(requests_most, st.spec_decoding_stats.num_requests_with_draft_tokens);
    }
    CHECK_MSG(most == 3 && requests_most == 1, "at most %lld guesses by %lld requests in one pass",
              static_cast<long long>(most), static_cast<long long>(requests_most));
    for (RequestId id : ids) CHECK(out[id].tokens.size() == 6);
  }
  // A small KV pool: guesses only take blocks the planned work left free, under both policies.
  for (auto policy : {CapacitySchedulerPolicy::guaranteed_no_evict, CapacitySchedulerPolicy::max_utilization}) {
    const Run plain = run<CopyingModel>(config(0, policy, 96), 24), spec = run<CopyingModel>(config(6, policy, 96), 24);
    CHECK_MSG(same_outputs(plain, spec), "policy %d", static_cast<int>(policy));
  }
  // A cancel between passes ends the request with what it had and frees every block; the others go on.
  {
    Harness h(std::make_unique<CopyingModel>(64, 512), config(5));
    const RequestId a = h.executor->enqueue(request({5, 6, 7, 8, 5, 6}, 200, /*streaming=*/true));
    const RequestId b = h.executor->enqueue(request({1, 2, 1, 2}, 20));
    h.executor->hold_iterations(3);
    CHECK(h.executor->wait_until_held(kWait));
    h.executor->cancel(a);
    h.executor->hold_iterations(-1);
    auto out = h.collect({a, b});
    CHECK(out[a].reason == FinishReason::cancelled && !out[a].tokens.empty() && out[a].tokens.size() < 200);
    CHECK(out[b].tokens.size() == 20 && out[b].reason == FinishReason::length);
    CHECK(all_blocks_free(*h.executor));
  }
})
