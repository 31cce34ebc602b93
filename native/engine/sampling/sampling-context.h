// What the sampler and the logits processors may look at besides the logits row of one sequence (or one beam).
// Pointers, not copies: the sampler runs once per token per beam, and the request's word lists and embedding bias
// can be large.
#pragma once
#include <cstdint>
#include <vector>

#include "scheduling/request.h"

namespace engine {

struct SamplingContext {
  const SamplingConfig* config = nullptr;
  uint64_t step = 0;                   // index of the token being generated (0 for the first output token)
  const TokenIds* tokens = nullptr;    // prompt + generated so far (of this beam)
  int32_t prompt_len = 0;
  int32_t end_id = -1;                 // -1: none (min_tokens then has nothing to mask)
  const std::vector<TokenIds>* bad_words = nullptr;   // null or empty: none
  const std::vector<float>* embedding_bias = nullptr; // null or empty: none; else [vocab]
  const std::vector<uint64_t>* allowed = nullptr;     // guided decoding: bit t of word t / 64 set = t may come next
};

}  // namespace engine
