// Per-request token sampling from one logits row. The row goes through a pipeline of stages:
//   1. logits processors (logits-processors.h: embedding bias, repetition/presence/frequency penalties,
//      min_tokens, bad words) that edit the row in place,
//   2. greedy (temperature 0 or top_k 1) -> argmax, or temperature scaling -> top-k -> top-p -> one random draw.
// Determinism: the draw for generation step s of a request is a pure function of (seed, s) — a counter-based
// generator, no state carried between steps — so pausing/resuming a request or batching it differently never
// changes the tokens it samples.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "sampling/logits-processors.h"
#include "sampling/sampling-context.h"
#include "scheduling/request.h"

namespace engine {

struct SampledToken {
  int32_t token = 0;
  // normalize_log_probs semantics of TRT-LLM: the natural log of the chosen token's probability under the
  // PROCESSED distribution actually sampled from (processors, then temperature, then top-k/top-p renormalisation);
  // for greedy, log-softmax of the processed logits (temperature does not change an argmax, so it is not applied).
  // Summing these gives cum_log_probs, so the two always agree.
  float log_prob = 0;
};

// Uniform double in [0, 1) from (seed, step): splitmix64 finalisers over both, so nearby seeds/steps decorrelate.
double counter_uniform(uint64_t seed, uint64_t step);

class Sampler {
 public:
  // Samples from logits[0 .. vocab). The row is copied into scratch space; the caller's data is not changed.
  SampledToken sample(const float* logits, int32_t vocab, const SamplingContext& ctx);
  // Beam search's view of a row: log-softmax of the processed logits (processors, then temperature when it is
  // > 0), written to out[0 .. vocab). Banned tokens come out as -inf.
  void processed_log_probs(const float* logits, int32_t vocab, const SamplingContext& ctx, std::vector<float>& out);

 private:
  LogitsProcessors processors_;
  std::vector<float> row_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit, token)
  std::vector<double> probs_;
};

}  // namespace engine
