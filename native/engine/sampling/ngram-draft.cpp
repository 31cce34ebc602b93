#include "sampling/ngram-draft.h"

#include <algorithm>

namespace engine {

std::vector<int32_t> ngram_draft(const std::vector<int32_t>& tokens, int32_t max_ngram, int32_t max_draft) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0 || len < 2) return {};
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= 1; --n) {
    // The latest start s < len - n with tokens[s, s + n) equal to the last n tokens; what follows it is the draft.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(tokens.begin() + s, tokens.begin() + s + n, tokens.end() - n)) continue;
      const int64_t from = s + n, to = std::min(len, from + max_draft);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

}  // namespace engine
