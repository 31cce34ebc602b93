// Beam search end to end over the FakeModel: beams and scores against an independent reference (HF's algorithm
// without end_id), num_return_sequences, streaming, copy-on-write KV sharing (block use never above the
// prompt-shared bound, every block free at the end), both capacity policies under a tight pool, cancellation.
#include <algorithm>
#include <cmath>
#include <thread>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

namespace {

ExecutorConfig config() {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.max_beam_width = 4;
  return c;
}

struct RefBeam {
  std::vector<int32_t> tokens;  // generated
  double cum = 0;
};

// Plain beam search: every (beam, token) continuation scored cum + log_softmax, the best `width` kept; at the end
// ranked by cum / length ^ length_penalty.
std::vector<RefBeam> reference_beams(const FakeModel& m, const std::vector<int32_t>& prompt, int32_t width,
                                     int32_t steps, float length_penalty) {
  std::vector<RefBeam> beams = {RefBeam{}};
  for (int32_t s = 0; s < steps; ++s) {
    struct C { double score; size_t beam; int32_t token; };
    std::vector<C> cands;
    for (size_t b = 0; b < beams.size(); ++b) {
      std::vector<int32_t> seq = prompt;
      seq.insert(seq.end(), beams[b].tokens.begin(), beams[b].tokens.end());
      const auto row = m.row_for(seq);
      double mx = *std::max_element(row.begin(), row.end()), z = 0;
      for (float x : row) z += std::exp(x - mx);
      for (int32_t t = 0; t < static_cast<int32_t>(row.size()); ++t)
        cands.push_back({beams[b].cum + row[t] - mx - std::log(z), b, t});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const C& a, const C& b) { return a.score > b.score; });
    std::vector<RefBeam> next;
    for (size_t i = 0; i < static_cast<size_t>(width); ++i) {
      RefBeam n = beams[cands[i].beam];
      n.tokens.push_back(cands[i].token);
      n.cum = cands[i].score;
      next.push_back(n);
    }
    beams = next;
  }
  std::stable_sort(beams.begin(), beams.end(), [&](const RefBeam& a, const RefBeam& b) {
    return a.cum / std::pow(steps, length_penalty) > b.cum / std::pow(steps, length_penalty);
  });
  return beams;
}

int32_t max_used_blocks(Executor& e) {
  int32_t used = 0;
  for (const auto& s : e.get_latest_iteration_stats()) used = std::max(used, s.kv_cache_stats.used_num_blocks);
  return used;
}

Request beam_request(std::vector<int32_t> prompt, int32_t max_tokens, int32_t width, bool streaming = false) {
  Request r = make_request(std::move(prompt), max_tokens, streaming);
  r.sampling.temperature = 1.0f;
  r.sampling.beam_width = width;
  r.output.exclude_input_from_output = true;
  r.output.return_log_probs = true;
  return r;
}

void check_against_reference(const Response& resp, const std::vector<RefBeam>& ref, size_t returned, const char* what) {
  const Result& r = resp.result;
  CHECK_MSG(r.output_token_ids.size() == returned, "%s: %zu beams returned", what, r.output_token_ids.size());
  for (size_t b = 0; b < std::min(returned, r.output_token_ids.size()); ++b) {
    CHECK_MSG(r.output_token_ids[b] == ref[b].tokens, "%s: beam %zu tokens", what, b);
    CHECK_MSG(std::fabs(r.cum_log_probs[b] - ref[b].cum) < 1e-3, "%s: beam %zu cum %f vs %f", what, b,
              r.cum_log_probs[b], ref[b].cum);
    double sum = 0;
    for (float x : r.log_probs[b]) sum += x;
    CHECK_MSG(std::fabs(sum - r.cum_log_probs[b]) < 1e-3, "%s: beam %zu log probs sum", what, b);
    CHECK(r.finish_reasons[b] == FinishReason::length);
  }
}

}  // namespace

static void test_beams_match_reference_and_share_kv() {
  for (int32_t width : {2, 3, 4}) {
    Harness h(config());
    const auto prompt = prompt_of(6, width);  // 6 tokens: one full shared block + a partial one to copy
    Request r = beam_request(prompt, 9, width);
    r.sampling.length_penalty = 0.7f;
    Request fewer = r;
    fewer.num_return_sequences = 1;
    h.executor->get_latest_iteration_stats();
    const RequestId a = h.executor->enqueue(r);
    auto out = h.collect({a});
    const int32_t used = max_used_blocks(*h.executor);
    const RequestId b = h.executor->enqueue(fewer);
    auto out2 = h.collect({b});
    const auto ref = reference_beams(*h.model, prompt, width, 9, 0.7f);
    check_against_reference(out[a].last, ref, static_cast<size_t>(width), "beams");
    check_against_reference(out2[b].last, ref, 1, "num_return_sequences 1");
    // Blocks: 1 shared prompt block + per beam ceil(15 / 4) - 1 = 3 -> 1 + 3 * width at most.
    CHECK_MSG(used <= 1 + 3 * width, "width %d: %d blocks used at most, bound %d", width, used, 1 + 3 * width);
    CHECK_MSG(used > 4, "width %d: beams hold their own blocks (%d used)", width, used);
    CHECK(h.model->kv_copies.load() > 0);  // the partial prompt block was copied on write
    CHECK(all_blocks_free(*h.executor));
    CHECK(h.executor->num_active_requests() == 0);
  }
}

static void test_beam_streaming() {
  Harness h(config());
  const auto prompt = prompt_of(5, 9);
  const RequestId id = h.executor->enqueue(beam_request(prompt, 6, 3, /*streaming=*/true));
  std::vector<Response> all;
  const auto deadline = std::chrono::steady_clock::now() + kWait;  // only a hung loop reaches it
  while ((all.empty() || !all.back().result.is_final) && std::chrono::steady_clock::now() < deadline)
    for (auto& r : h.executor->await_responses(std::chrono::milliseconds(50))) all.push_back(std::move(r));
  CHECK(!all.empty() && all.back().result.is_final);
  CHECK_MSG(all.size() == 6, "streaming responses: %zu", all.size());
  // Each response carries the whole current beams (not deltas): beam 0 of response k has k + 1 tokens.
  for (size_t k = 0; k + 1 < all.size(); ++k) {
    CHECK(all[k].request_id == id && all[k].result.output_token_ids.size() == 3);
    CHECK(all[k].result.output_token_ids[0].size() == k + 1);
    CHECK(all[k].result.finish_reasons[0] == FinishReason::not_finished);
  }
  check_against_reference(all.back(), reference_beams(*h.model, prompt, 3, 6, 1.0f), 3, "streaming final");
  CHECK(all_blocks_free(*h.executor));
}

// A pool that holds exactly one beam request's lifetime: the second waits (no-evict) or other sequences are
// paused around it (max_utilization); every output stays right and every block comes back.
static void test_tight_pool(CapacitySchedulerPolicy policy) {
  ExecutorConfig c = config();
  c.policy = policy;
  c.max_tokens_in_paged_kv_cache = (1 + 3 * 4) * 4;  // 13 blocks: 1 shared + 4 beams x 3
  Harness h(c);
  const auto p1 = prompt_of(6, 1), p2 = prompt_of(6, 2), p3 = prompt_of(7, 3);
  const RequestId a = h.executor->enqueue(beam_request(p1, 9, 4));
  const RequestId b = h.executor->enqueue(beam_request(p2, 9, 4));
  Request plain = make_request(p3, 20);
  plain.output.exclude_input_from_output = true;
  const RequestId d = h.executor->enqueue(plain);
  auto out = h.collect({a, b, d});
  CHECK(!out[a].has_error && !out[b].has_error && !out[d].has_error);
  check_against_reference(out[a].last, reference_beams(*h.model, p1, 4, 9, 1.0f), 4, "tight pool a");
  check_against_reference(out[b].last, reference_beams(*h.model, p2, 4, 9, 1.0f), 4, "tight pool b");
  CHECK(out[d].tokens == reference_greedy(*h.model, p3, 20));
  CHECK(all_blocks_free(*h.executor));

  // One block less than a beam request's lifetime: rejected at enqueue, naming the beams.
  ExecutorConfig small = c;
  small.max_tokens_in_paged_kv_cache = 12 * 4;
  Harness s(small);
  CHECK_THROWS(s.executor->enqueue(beam_request(p1, 9, 4)), "x beam_width 4 need 13 KV blocks");
}

static void test_cancel_beam_request() {
  Harness h(config());
  // Three steps (three streamed responses), then cancel mid-flight.
  h.executor->hold_iterations(3);
  const RequestId id = h.executor->enqueue(beam_request(prompt_of(6, 3), 60, 4, /*streaming=*/true));
  CHECK(h.executor->wait_until_held(kWait));
  CHECK(h.executor->await_responses(std::chrono::milliseconds(0)).size() == 3);
  h.executor->cancel(id);
  h.executor->hold_iterations(-1);
  auto out = h.collect({id});
  CHECK(out[id].is_final && out[id].reason == FinishReason::cancelled);
  CHECK(out[id].last.result.output_token_ids.size() == 4);  // the live beams, with the final reason
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
}

static void test_end_id_hypotheses() {
  Harness h(config());
  const auto prompt = prompt_of(6, 11);
  const auto ref = reference_beams(*h.model, prompt, 3, 8, 1.0f);
  // The best beam's 3rd token as end_id: hypotheses finish early, end_id is never returned.
  Request r = beam_request(prompt, 8, 3);
  r.end_id = ref[0].tokens[2];
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  const Result& res = out[id].last.result;
  CHECK(!res.output_token_ids.empty());
  bool any_end = false;
  for (size_t b = 0; b < res.output_token_ids.size(); ++b) {
    CHECK(std::find(res.output_token_ids[b].begin(), res.output_token_ids[b].end(), r.end_id) == res.output_token_ids[b].end());
    any_end = any_end || res.finish_reasons[b] == FinishReason::end_id;
  }
  CHECK(any_end);
  // Scores are non-increasing (best first).
  for (size_t b = 1; b < res.output_token_ids.size(); ++b) {
    const double prev = res.cum_log_probs[b - 1] / static_cast<double>(res.log_probs[b - 1].size() + (res.finish_reasons[b - 1] == FinishReason::end_id ? 1 : 0));
    const double cur = res.cum_log_probs[b] / static_cast<double>(res.log_probs[b].size() + (res.finish_reasons[b] == FinishReason::end_id ? 1 : 0));
    CHECK_MSG(prev >= cur - 1e-9, "beam %zu score %f above beam %zu score %f", b, cur, b - 1, prev);
  }
  CHECK(all_blocks_free(*h.executor));
}

TEST_MAIN({
  test_beams_match_reference_and_share_kv();
  test_beam_streaming();
  test_tight_pool(CapacitySchedulerPolicy::guaranteed_no_evict);
  test_tight_pool(CapacitySchedulerPolicy::max_utilization);
  test_cancel_beam_request();
  test_end_id_hypotheses();
})
