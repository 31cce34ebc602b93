// The allowed tokens a logits row scores highest: the candidates a guided request's budget check near max_tokens
// walks (grammar-matcher.h's restrict_to_budget). A 128k-token row inside a JSON string allows nearly every
// token, so this runs over the whole row, on the executor's thread, while the device waits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace engine {

// The `k` allowed ids of `logits` (bit id & 63 of allowed[id >> 6]; ids below vocab) with the highest scores, NaN
// scoring as -inf and ties going to the lower id; all of them when fewer are allowed. In no particular order.
std::vector<int32_t> likeliest_allowed(const float* logits, int32_t vocab, const std::vector<uint64_t>& allowed,
                                       size_t k);

}  // namespace engine
