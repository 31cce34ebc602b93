// Decoding features end to end over the FakeModel: stop words (across streaming responses, output keeps them),
// multi-token bad words, min_tokens against end_id, embedding bias, penalties against an independent reference,
// and enqueue-time validation of every new field.
#include <algorithm>
#include <cmath>
#include <limits>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

static ExecutorConfig config() {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.max_beam_width = 4;
  return c;
}

static int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());  // first of equal maxima
}

static void test_stop_words_across_stream_boundaries() {
  Harness h(config());
  const auto prompt = prompt_of(7, 4);
  const auto free_run = reference_greedy(*h.model, prompt, 10);
  // A two-token stop word: its tokens arrive in two different streaming responses.
  Request r = make_request(prompt, 10, /*streaming=*/true);
  r.stop_words = {{99 % 64, 98 % 64, 97 % 64}, {free_run[3], free_run[4]}};
  Request nr = make_request(prompt, 10);
  nr.stop_words = r.stop_words;
  nr.output.exclude_input_from_output = true;
  // A stop word the PROMPT ends with must not stop anything: only generated tokens count.
  Request p = make_request(prompt, 4);
  p.stop_words = {{prompt[5], prompt[6]}};
  p.output.exclude_input_from_output = true;
  const RequestId a = h.executor->enqueue(r), b = h.executor->enqueue(nr), c = h.executor->enqueue(p);
  auto out = h.collect({a, b, c});
  const std::vector<int32_t> expected(free_run.begin(), free_run.begin() + 5);  // the stop word is kept
  CHECK(out[a].tokens == expected);
  CHECK(out[a].reason == FinishReason::stop_words);
  CHECK_MSG(out[a].num_responses == 5, "streaming responses: %d", out[a].num_responses);
  CHECK(out[b].tokens == expected && out[b].reason == FinishReason::stop_words);
  CHECK(out[c].reason == FinishReason::length && out[c].tokens.size() == 4);
  CHECK(all_blocks_free(*h.executor));
}

static void test_bad_words_multi_token() {
  Harness h(config());
  const auto prompt = prompt_of(6, 5);
  const auto free_run = reference_greedy(*h.model, prompt, 6);
  // Ban the phrase {free_run[0], free_run[1]}: after free_run[0], free_run[1] is off limits.
  Request r = make_request(prompt, 6);
  r.output.exclude_input_from_output = true;
  r.bad_words = {{free_run[0], free_run[1]}};
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  std::vector<int32_t> seq = prompt, expected;
  for (int i = 0; i < 6; ++i) {
    auto row = h.model->row_for(seq);
    if (seq.back() == free_run[0]) row[free_run[1]] = -std::numeric_limits<float>::infinity();
    const int32_t t = argmax(row);
    expected.push_back(t);
    seq.push_back(t);
  }
  CHECK(expected[0] == free_run[0] && expected[1] != free_run[1]);
  CHECK(out[id].tokens == expected);
  CHECK(all_blocks_free(*h.executor));
}

static void test_min_tokens_masks_end_id() {
  Harness h(config());
  const auto prompt = prompt_of(5, 6);
  const auto free_run = reference_greedy(*h.model, prompt, 8);
  const int32_t end_id = free_run[0];  // would end the request at once
  Request r = make_request(prompt, 8);
  r.output.exclude_input_from_output = true;
  r.end_id = end_id;
  Request m = r;
  m.sampling.min_tokens = 3;
  const RequestId a = h.executor->enqueue(r), b = h.executor->enqueue(m);
  auto out = h.collect({a, b});
  CHECK(out[a].tokens.empty() && out[a].reason == FinishReason::end_id);
  std::vector<int32_t> seq = prompt, expected;
  FinishReason reason = FinishReason::length;
  for (int i = 0; i < 8; ++i) {
    auto row = h.model->row_for(seq);
    if (i < 3) row[end_id] = -std::numeric_limits<float>::infinity();
    const int32_t t = argmax(row);
    if (t == end_id) { reason = FinishReason::end_id; break; }
    expected.push_back(t);
    seq.push_back(t);
  }
  CHECK(expected.size() >= 3 && expected[0] != end_id);
  CHECK(out[b].tokens == expected);
  CHECK(out[b].reason == reason);
}

static void test_embedding_bias() {
  Harness h(config());
  Request r = make_request(prompt_of(5, 7), 5);
  r.output.exclude_input_from_output = true;
  r.embedding_bias.assign(64, 0.0f);
  r.embedding_bias[42] = 10.0f;  // beats the fake model's best logit (< 5) at every step
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  CHECK(out[id].tokens == std::vector<int32_t>(5, 42));
}

// Repetition over prompt + output, presence/frequency over output only, against a plain re-implementation.
static void test_penalties_against_reference() {
  Harness h(config());
  const auto prompt = prompt_of(6, 8);
  struct Case { float rep, pres, freq; };
  const Case cases[] = {{10.0f, 0, 0}, {1.0f, 5.0f, 0}, {1.0f, 0, 2.5f}, {3.0f, 1.0f, 0.5f}};
  for (const Case& k : cases) {
    Request r = make_request(prompt, 12);
    r.output.exclude_input_from_output = true;
    r.sampling.repetition_penalty = k.rep;
    r.sampling.presence_penalty = k.pres;
    r.sampling.frequency_penalty = k.freq;
    const RequestId id = h.executor->enqueue(r);
    auto out = h.collect({id});
    std::vector<int32_t> seq = prompt, expected;
    for (int i = 0; i < 12; ++i) {
      auto row = h.model->row_for(seq);
      for (int32_t t = 0; t < 64; ++t) {
        const bool present = std::find(seq.begin(), seq.end(), t) != seq.end();
        const auto count = std::count(seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.end(), t);
        if (present) row[t] = row[t] > 0 ? row[t] / k.rep : row[t] * k.rep;
        if (count > 0) row[t] -= k.pres + k.freq * static_cast<float>(count);
      }
      const int32_t t = argmax(row);
      expected.push_back(t);
      seq.push_back(t);
    }
    CHECK_MSG(out[id].tokens == expected, "penalties rep %g pres %g freq %g", k.rep, k.pres, k.freq);
  }
  // The strong repetition penalty really changes this model's greedy output (it repeats tokens otherwise).
  Request plain = make_request(prompt, 12), strong = plain;
  strong.sampling.repetition_penalty = 10.0f;
  const RequestId p = h.executor->enqueue(plain), s = h.executor->enqueue(strong);
  auto both = h.collect({p, s});
  CHECK(both[p].tokens != both[s].tokens);
  CHECK(all_blocks_free(*h.executor));
}

static void test_validation() {
  ExecutorConfig c = config();
  c.max_logits_elements = 1000;
  Harness h(c);
  const auto ok = make_request(prompt_of(4, 1), 4);
  auto bad = [&](auto edit, const char* needle) {
    Request r = ok;
    edit(r);
    CHECK_THROWS(h.executor->enqueue(r), needle);
  };
  bad([](Request& r) { r.sampling.beam_width = 5; }, "max_beam_width (4), got 5");
  bad([](Request& r) { r.sampling.repetition_penalty = 0; }, "repetition_penalty must be a finite number > 0, got 0");
  bad([](Request& r) { r.sampling.presence_penalty = std::nanf(""); }, "presence_penalty must be finite, got nan");
  bad([](Request& r) { r.sampling.frequency_penalty = INFINITY; }, "frequency_penalty must be finite, got inf");
  bad([](Request& r) { r.sampling.length_penalty = -INFINITY; }, "length_penalty must be finite, got -inf");
  bad([](Request& r) { r.sampling.min_tokens = 5; }, "min_tokens must be in [0, max_tokens 4], got 5");
  bad([](Request& r) { r.sampling.min_tokens = -1; }, "min_tokens must be in [0, max_tokens 4], got -1");
  bad([](Request& r) { r.stop_words = {{1}, {}}; }, "stop_words[1] is empty");
  bad([](Request& r) { r.bad_words = {{1, 64}}; }, "bad_words[0][1] = 64 is out of range [0, 64)");
  bad([](Request& r) { r.embedding_bias.assign(63, 0.0f); }, "embedding_bias has 63 values but must have vocab_size 64");
  bad([](Request& r) { r.embedding_bias.assign(64, 0.0f); r.embedding_bias[9] = NAN; }, "embedding_bias[9] must be finite, got nan");
  bad([](Request& r) { r.sampling.beam_width = 2; r.num_return_sequences = 3; }, "num_return_sequences must be in [0, beam_width 2]");
  bad([](Request& r) { r.num_return_sequences = 2; }, "num_return_sequences must be in [0, beam_width 1]");
  bad([](Request& r) { r.sampling.early_stopping = 2; }, "early_stopping must be -1");
  bad([](Request& r) { r.sampling.beam_search_diversity_rate = -1; }, "beam_search_diversity_rate must be a finite number >= 0");
  bad([](Request& r) { r.output.return_generation_logits = true; r.max_tokens = 16; }, "exceeds max_logits_elements 1000");
  bad([](Request& r) { r.output.return_context_logits = true; r.input_token_ids.assign(16, 1); }, "exceeds max_logits_elements 1000");
  // The good request still goes through.
  const RequestId id = h.executor->enqueue(ok);
  CHECK(h.collect({id})[id].reason == FinishReason::length);
}

TEST_MAIN({
  test_stop_words_across_stream_boundaries();
  test_bad_words_multi_token();
  test_min_tokens_masks_end_id();
  test_embedding_bias();
  test_penalties_against_reference();
  test_validation();
})
