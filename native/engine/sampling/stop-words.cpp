#include "sampling/stop-words.h"

namespace engine {

bool ends_with_stop_word(const TokenIds& tokens, int32_t prompt_len, const std::vector<TokenIds>& words) {
  const size_t generated = tokens.size() > static_cast<size_t>(prompt_len) ? tokens.size() - prompt_len : 0;
  for (const TokenIds& word : words) {
    if (word.empty() || word.size() > generated) continue;
    const size_t start = tokens.size() - word.size();
    bool match = true;
    for (size_t i = 0; i < word.size() && match; ++i) match = tokens[start + i] == word[i];
    if (match) return true;
  }
  return false;
}

}  // namespace engine
