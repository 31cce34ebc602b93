// The logits processors on hand-computed rows: TensorRT-LLM's repetition (prompt + output), presence and
// frequency (output only) penalties, min_tokens, single- and multi-token bad words, embedding bias, and the
// sampler's processed log probs.
#include <cmath>
#include <limits>

#include "check.h"
#include "sampling/logits-processors.h"
#include "sampling/sampler.h"

using namespace engine;

static const float kInf = std::numeric_limits<float>::infinity();

static bool near(float a, float b) { return std::fabs(a - b) < 1e-6f; }

static void test_penalties() {
  SamplingConfig cfg;
  cfg.repetition_penalty = 2.0f;
  cfg.presence_penalty = 0.5f;
  cfg.frequency_penalty = 0.25f;
  TokenIds tokens = {0, 1, 2, 2};  // prompt {0, 1}, output {2, 2}
  SamplingContext ctx;
  ctx.config = &cfg;
  ctx.tokens = &tokens;
  ctx.prompt_len = 2;
  ctx.step = 2;
  std::vector<float> row = {2.0f, -1.0f, 0.5f, 3.0f};
  LogitsProcessors p;
  p.apply(row.data(), 4, ctx);
  CHECK(near(row[0], 1.0f));    // prompt only: repetition (2 / 2), no presence/frequency
  CHECK(near(row[1], -2.0f));   // negative: multiplied (-1 * 2)
  CHECK(near(row[2], 0.25f - 0.5f - 0.25f * 2));  // output twice: 0.5 / 2 - presence - 2 * frequency
  CHECK(near(row[3], 3.0f));    // absent: untouched

  // Scratch is reset between rows: the same call again gives the same answer.
  std::vector<float> again = {2.0f, -1.0f, 0.5f, 3.0f};
  p.apply(again.data(), 4, ctx);
  CHECK(again == row);
}

static void test_min_tokens_and_bias() {
  SamplingConfig cfg;
  cfg.min_tokens = 2;
  TokenIds tokens = {5};
  std::vector<float> bias = {0.0f, 10.0f, 0.0f, -1.0f};
  SamplingContext ctx;
  ctx.config = &cfg;
  ctx.tokens = &tokens;
  ctx.prompt_len = 1;
  ctx.end_id = 2;
  ctx.embedding_bias = &bias;
  LogitsProcessors p;
  for (uint64_t step = 0; step < 3; ++step) {
    ctx.step = step;
    std::vector<float> row = {1.0f, 1.0f, 1.0f, 1.0f};
    p.apply(row.data(), 4, ctx);
    CHECK(near(row[1], 11.0f) && near(row[3], 0.0f));
    CHECK_MSG((row[2] == -kInf) == (step < 2), "step %d: end_id logit %f", static_cast<int>(step), row[2]);
  }
}

static void test_bad_words() {
  SamplingConfig cfg;
  std::vector<TokenIds> bad = {{3}, {7, 1}, {4, 5, 6}};
  SamplingContext ctx;
  ctx.config = &cfg;
  ctx.bad_words = &bad;
  LogitsProcessors p;
  auto run = [&](TokenIds tokens) {
    ctx.tokens = &tokens;
    ctx.prompt_len = 1;
    std::vector<float> row(8, 0.0f);
    p.apply(row.data(), 8, ctx);
    return row;
  };
  auto r = run({0, 2});
  CHECK(r[3] == -kInf && r[1] == 0.0f && r[6] == 0.0f);  // single-token word: always banned
  r = run({0, 7});
  CHECK(r[1] == -kInf);                                   // tail {7} = prefix of {7, 1}
  r = run({7});
  CHECK(r[1] == -kInf);                                   // the prompt counts too (TRT-LLM / HF)
  r = run({0, 4, 5});
  CHECK(r[6] == -kInf && r[1] == 0.0f);                   // three-token word
  r = run({0, 5});
  CHECK(r[6] == 0.0f);                                    // partial prefix only: not banned
}

static void test_processed_log_probs() {
  SamplingConfig cfg;
  cfg.temperature = 2.0f;
  TokenIds tokens = {0};
  std::vector<TokenIds> bad = {{1}};
  SamplingContext ctx;
  ctx.config = &cfg;
  ctx.tokens = &tokens;
  ctx.prompt_len = 1;
  ctx.bad_words = &bad;
  Sampler s;
  std::vector<float> out;
  const float row[3] = {2.0f, 5.0f, 0.0f};
  s.processed_log_probs(row, 3, ctx, out);
  // token 1 banned; temperature 2 -> logits {1, -inf, 0}; log-softmax.
  const double z = std::log(std::exp(1.0) + 1.0);
  CHECK(near(out[0], static_cast<float>(1.0 - z)) && out[1] == -kInf && near(out[2], static_cast<float>(-z)));
}

TEST_MAIN({
  test_penalties();
  test_min_tokens_and_bias();
  test_bad_words();
  test_processed_log_probs();
})
