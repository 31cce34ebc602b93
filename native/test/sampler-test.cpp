// Sampler: greedy paths, top-k/top-p limits, counter-based determinism (seed, step), log probs, and a coarse
// distribution check.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "check.h"
#include "sampling/sampler.h"

using namespace engine;

static SampledToken draw(Sampler& s, const std::vector<float>& row, const SamplingConfig& cfg, uint64_t step) {
  SamplingContext ctx;
  ctx.config = &cfg;
  ctx.step = step;
  return s.sample(row.data(), static_cast<int32_t>(row.size()), ctx);
}

static void test_greedy() {
  Sampler s;
  std::vector<float> row = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f};
  SamplingConfig cfg;
  cfg.temperature = 0;
  auto t = draw(s, row, cfg, 0);
  CHECK(t.token == 1);  // tie between 1 and 3: lower id wins
  // log-softmax of the raw logits
  double sum = 0;
  for (float x : row) sum += std::exp(x);
  CHECK(std::fabs(t.log_prob - (2.0 - std::log(sum))) < 1e-5);

  SamplingConfig k1;
  k1.temperature = 1.0f;
  k1.top_k = 1;
  for (uint64_t step = 0; step < 20; ++step) CHECK(draw(s, row, k1, step).token == 1);

  SamplingConfig tiny_p;
  tiny_p.temperature = 1.0f;
  tiny_p.top_p = 1e-6f;
  std::vector<float> row2 = {0.1f, 2.0f, -1.0f, 3.0f, 0.5f};
  for (uint64_t step = 0; step < 20; ++step) {
    auto r = draw(s, row2, tiny_p, step);
    CHECK(r.token == 3);
    CHECK(std::fabs(r.log_prob) < 1e-6);  // renormalised over one token: probability 1
  }
}

// TensorRT-LLM's default: a request that sets neither top_k nor top_p decodes greedily, whatever its temperature.
static void test_default_is_greedy() {
  Sampler s;
  std::vector<float> row = {0.1f, 2.0f, -1.0f, 1.9f};
  SamplingConfig hot;
  hot.temperature = 2.0f;
  hot.seed = 7;
  for (uint64_t step = 0; step < 50; ++step) CHECK(draw(s, row, hot, step).token == 1);
  hot.top_p = 1.0f;  // asking for the nucleus (even all of it) samples
  bool other = false;
  for (uint64_t step = 0; step < 50; ++step) other |= draw(s, row, hot, step).token != 1;
  CHECK(other);
}

static void test_determinism() {
  Sampler s;
  std::vector<float> flat(100, 0.0f);
  SamplingConfig a;
  a.temperature = 1.0f;
  a.top_p = 1.0f;
  a.seed = 42;
  std::vector<int32_t> run1, run2, other;
  for (uint64_t step = 0; step < 32; ++step) run1.push_back(draw(s, flat, a, step).token);
  // Same (seed, step) in a different order -> same tokens (no hidden state).
  for (int64_t step = 31; step >= 0; --step) run2.insert(run2.begin(), draw(s, flat, a, static_cast<uint64_t>(step)).token);
  CHECK(run1 == run2);
  SamplingConfig b = a;
  b.seed = 43;
  for (uint64_t step = 0; step < 32; ++step) other.push_back(draw(s, flat, b, step).token);
  CHECK(run1 != other);
  // Different steps do not all repeat one token.
  bool varied = false;
  for (int32_t t : run1) varied |= t != run1[0];
  CHECK(varied);
  // Unset seed behaves as seed 0.
  SamplingConfig none;
  none.temperature = 1.0f;
  none.top_p = 1.0f;
  SamplingConfig zero = none;
  zero.seed = 0;
  for (uint64_t step = 0; step < 8; ++step) CHECK(draw(s, flat, none, step).token == draw(s, flat, zero, step).token);
  // Uniform draws stay in [0, 1).
  for (uint64_t i = 0; i < 1000; ++i) {
    double u = counter_uniform(7, i);
    CHECK(u >= 0.0 && u < 1.0);
  }
}

static void test_top_k_distribution() {
  Sampler s;
  // Probabilities proportional to exp(logit): tokens 0..3 have logits log(4), log(3), log(2), log(1); the rest are
  // far below but top_k = 3 must exclude token 3 and everything else entirely.
  std::vector<float> row(16, -1.0f);
  row[0] = std::log(4.0f);
  row[1] = std::log(3.0f);
  row[2] = std::log(2.0f);
  row[3] = std::log(1.0f);
  SamplingConfig cfg;
  cfg.temperature = 1.0f;
  cfg.top_k = 3;
  cfg.seed = 1;
  std::map<int32_t, int> counts;
  const int n = 9000;
  for (int i = 0; i < n; ++i) {
    auto t = draw(s, row, cfg, static_cast<uint64_t>(i));
    ++counts[t.token];
    if (t.token == 0) CHECK(std::fabs(t.log_prob - std::log(4.0 / 9.0)) < 1e-5);
  }
  CHECK(counts.size() == 3);
  CHECK(counts.count(3) == 0);
  // Expected 4000 / 3000 / 2000; allow about 5 standard deviations.
  CHECK_MSG(std::abs(counts[0] - 4000) < 250, "token 0 drawn %d times", counts[0]);
  CHECK_MSG(std::abs(counts[1] - 3000) < 230, "token 1 drawn %d times", counts[1]);
  CHECK_MSG(std::abs(counts[2] - 2000) < 200, "token 2 drawn %d times", counts[2]);

  // top_p after top_k: mass 4/9 + 3/9 = 0.78 >= 0.7 keeps tokens 0 and 1 only.
  cfg.top_p = 0.7f;
  counts.clear();
  for (int i = 0; i < 2000; ++i) ++counts[draw(s, row, cfg, static_cast<uint64_t>(i)).token];
  CHECK(counts.size() == 2 && counts.count(0) && counts.count(1));

  // Temperature sharpens: at 0.25 token 0 dominates far more than at 1.
  SamplingConfig cold;
  cold.temperature = 0.25f;
  cold.top_p = 1.0f;
  cold.seed = 3;
  int zeros = 0;
  for (int i = 0; i < 2000; ++i) zeros += draw(s, row, cold, static_cast<uint64_t>(i)).token == 0;
  CHECK_MSG(zeros > 1300, "token 0 drawn %d of 2000 at temperature 0.25", zeros);
}

static void test_top_p_large_vocab() {
  // A flat row of 1000 tokens with top_p 0.5: exactly the 500 lowest ids survive (ties go to lower ids). This
  // exercises the growing partial sort (its first head is 64 tokens).
  Sampler s;
  std::vector<float> flat(1000, 0.0f);
  SamplingConfig cfg;
  cfg.temperature = 1.0f;
  cfg.top_p = 0.5f;
  cfg.seed = 5;
  int32_t max_token = 0;
  bool all_in = true;
  for (uint64_t i = 0; i < 3000; ++i) {
    auto t = draw(s, flat, cfg, i);
    all_in &= t.token < 500;
    max_token = std::max(max_token, t.token);
    if (i == 0) CHECK(std::fabs(t.log_prob - std::log(1.0 / 500)) < 1e-4);
  }
  CHECK(all_in);
  CHECK(max_token > 450);
  // All tokens banned but one: always that one.
  std::vector<float> banned(300, -std::numeric_limits<float>::infinity());
  banned[123] = 0.0f;
  for (uint64_t i = 0; i < 10; ++i) CHECK(draw(s, banned, cfg, i).token == 123);
}

TEST_MAIN({
  test_top_p_large_vocab();
  test_greedy();
  test_default_is_greedy();
  test_determinism();
  test_top_k_distribution();
})
