// Per-request token sampling from one logits row. The row goes through a pipeline of stages:
//   1. logits processors (next issue: repetition/presence/frequency penalties, min_tokens, bad words) that edit
//      the row in place,
//   2. greedy (temperature 0 or top_k 1) -> argmax, or temperature scaling -> top-k -> top-p -> one random draw.
// Determinism: the draw for generation step s of a request is a pure function of (seed, s) — a counter-based
// generator, no state carried between steps — so pausing/resuming a request or batching it differently never
// changes the tokens it samples.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "request.h"

namespace engine {

struct SampledToken {
  int32_t token = 0;
  // Natural log of the chosen token's probability under the distribution actually sampled from (after
  // temperature, top-k and top-p renormalisation); for greedy, log-softmax of the (processed) raw logits.
  float log_prob = 0;
};

// What the pipeline may look at besides the row; grows with the next issue's processors (generated tokens for
// penalties, step for min_tokens, ...).
struct SamplingContext {
  const SamplingConfig* config = nullptr;
  uint64_t step = 0;                   // index of the token being generated (0 for the first output token)
  const TokenIds* tokens = nullptr;    // prompt + generated so far
  int32_t prompt_len = 0;
};

// Uniform double in [0, 1) from (seed, step): splitmix64 finalisers over both, so nearby seeds/steps decorrelate.
double counter_uniform(uint64_t seed, uint64_t step);

class Sampler {
 public:
  // Samples from logits[0 .. vocab). The row is copied into scratch space; the caller's data is not changed.
  SampledToken sample(const float* logits, int32_t vocab, const SamplingContext& ctx);

 private:
  void apply_logits_processors(std::vector<float>& row, const SamplingContext& ctx);
  std::vector<float> row_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit, token)
  std::vector<double> probs_;
};

}  // namespace engine
