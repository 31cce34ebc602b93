// The tokenizer's vocabulary as the grammar sees it (TensorRT-LLM's GuidedDecodingConfig encoded_vocab): the bytes
// each token id stands for, sorted so that tokens sharing a prefix are neighbours and a walk over them can reuse the
// matcher's states along the common prefix (a trie without building one).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engine::grammar {

class TokenVocab {
 public:
  // token_bytes[i]: token i's bytes; empty: a special or unknown token, never allowed inside a grammar. Ids from
  // token_bytes.size() to vocab_size (a model's padded vocabulary) are never allowed either. Throws
  // EngineError(invalid_argument) when there are more tokens than vocab_size.
  TokenVocab(std::vector<std::string> token_bytes, int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }
  size_t mask_words() const { return (static_cast<size_t>(vocab_size_) + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // Ids of the non-empty tokens in byte order; rank_of(id) is an id's index there (-1: empty token).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  int32_t rank_of(int32_t id) const { return rank_[static_cast<size_t>(id)]; }
  // A token whose bytes are exactly `bytes` (-1: none), by binary search over the sorted order.
  int32_t find(const std::string& bytes) const;
  // The bytes of the token at `rank`, from one buffer in sorted order (a whole-vocabulary walk reads it front to
  // back), and how many leading bytes it shares with the token at rank - 1 (0 for rank 0).
  std::string_view sorted_bytes(int32_t rank) const {
    const auto r = static_cast<size_t>(rank);
    return std::string_view(sorted_text_).substr(static_cast<size_t>(sorted_at_[r]), static_cast<size_t>(sorted_at_[r + 1] - sorted_at_[r]));
  }
  int32_t common_with_previous(int32_t rank) const { return lcp_[static_cast<size_t>(rank)]; }
  // The longest token's byte length: how far past a grammar position a mask can see.
  int32_t max_token_bytes() const { return max_token_bytes_; }
  // The first rank after `rank` whose bytes do not start with the first `depth` bytes of the token at `rank`
  // (1 <= depth <= its length): the end of that prefix's subtree, which a walk skips at once when the prefix dies.
  int32_t subtree_end(int32_t rank, size_t depth) const {
    return subtree_end_[static_cast<size_t>(sorted_at_[static_cast<size_t>(rank)]) + depth - 1];
  }

 private:
  std::vector<std::string> bytes_;
  int32_t vocab_size_ = 0;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> rank_;
  std::string sorted_text_;          // the sorted tokens' bytes, back to back
  std::vector<int64_t> sorted_at_;   // rank -> offset in sorted_text_ (one more entry: the end)
  std::vector<int32_t> lcp_;         // rank -> bytes shared with rank - 1
  std::vector<int32_t> subtree_end_;  // [sorted_at_[rank] + depth - 1]: subtree_end(rank, depth)
  int32_t max_token_bytes_ = 0;
};

}  // namespace engine::grammar
