#include "grammar/token-vocab.h"

#include <algorithm>

#include "errors.h"

namespace engine::grammar {

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, int32_t vocab_size)
    : bytes_(std::move(token_bytes)), vocab_size_(vocab_size) {
  if (static_cast<int32_t>(bytes_.size()) > vocab_size_) {
    throw EngineError(ErrorCode::invalid_argument,
                      "guidedDecoding describes " + std::to_string(bytes_.size()) +
                          " tokens but the model's vocabulary has " + std::to_string(vocab_size_));
  }
  bytes_.resize(static_cast<size_t>(vocab_size_));
  rank_.assign(static_cast<size_t>(vocab_size_), -1);
  for (int32_t id = 0; id < vocab_size_; ++id)
    if (!bytes_[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  std::sort(sorted_.begin(), sorted_.end(), [this](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  for (size_t k = 0; k < sorted_.size(); ++k) rank_[static_cast<size_t>(sorted_[k])] = static_cast<int32_t>(k);
  sorted_at_.reserve(sorted_.size() + 1);
  lcp_.reserve(sorted_.size());
  sorted_at_.push_back(0);
  for (size_t k = 0; k < sorted_.size(); ++k) {
    const std::string& t = bytes_[static_cast<size_t>(sorted_[k])];
    size_t common = 0;
    if (k > 0) {
      const std::string& p = bytes_[static_cast<size_t>(sorted_[k - 1])];
      while (common < p.size() && common < t.size() && p[common] == t[common]) ++common;
    }
    lcp_.push_back(static_cast<int32_t>(common));
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(t.size()));
    sorted_text_ += t;
    sorted_at_.push_back(static_cast<int64_t>(sorted_text_.size()));
  }
  // Backwards: the token after `r` shares r's first d bytes exactly when their common prefix is d long or more, and
  // then r's subtree at depth d ends where that token's does.
  subtree_end_.assign(sorted_text_.size(), 0);
  const auto n = static_cast<int32_t>(sorted_.size());
  for (int32_t r = n - 1; r >= 0; --r) {
    const auto at = static_cast<size_t>(sorted_at_[static_cast<size_t>(r)]);
    const auto len = static_cast<size_t>(sorted_at_[static_cast<size_t>(r) + 1]) - at;
    const size_t shared = r + 1 < n ? static_cast<size_t>(lcp_[static_cast<size_t>(r) + 1]) : 0;
    const size_t next_at = r + 1 < n ? static_cast<size_t>(sorted_at_[static_cast<size_t>(r) + 1]) : 0;
    for (size_t d = 1; d <= len; ++d) subtree_end_[at + d - 1] = d <= shared ? subtree_end_[next_at + d - 1] : r + 1;
  }
}

int32_t TokenVocab::find(const std::string& bytes) const {
  const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), bytes,
                                   [this](int32_t id, const std::string& b) { return bytes_[static_cast<size_t>(id)] < b; });
  return it != sorted_.end() && bytes_[static_cast<size_t>(*it)] == bytes ? *it : -1;
}

}  // namespace engine::grammar
