// Runs the matcher over tokens taken in byte order (TokenVocab::sorted ranks, ascending), reusing the states along
// each token's common prefix with the one before and skipping every token under a prefix no stack survives: the
// work of a trie walk without a trie.
#pragma once
#include <string>
#include <vector>

#include "grammar/grammar-stacks.h"
#include "grammar/token-vocab.h"

namespace engine::grammar {

struct TokenOutcome {
  bool consumed = false;        // every byte was matched by some stack
  bool alive = false;           // consumed, and something may follow (stacks left, the root may end, or — while
                                // analysing — the analysed rule ended with the last byte)
  bool popped_before = false;   // analysing: the rule ended into its unknown caller before the last byte (or
                                // before the prefix died), so the answer depends on that caller
};

class TokenWalk {
 public:
  TokenWalk(Stacks& stacks, const TokenVocab& vocab, const StackSet& start);
  // Ranks must come in ascending order.
  TokenOutcome step(int32_t rank);
  // After a step: the first rank after it whose bytes do not start with the prefix that just died (every token in
  // between shares that prefix, so it has the same outcome); rank + 1 when nothing died. For walks over the whole
  // vocabulary, which then skip a dead subtree in one binary search.
  int32_t next_live_rank(int32_t rank) const;
  // The stacks after the last step's token (when it was consumed).
  const StackSet& state_after() const { return states_[computed_]; }
  // Whether the tokens skipped that way popped before their prefix died (their outcome's popped_before).
  bool dead_prefix_popped() const { return dead_ > 0 && popped_any_[dead_] != 0; }

 private:
  Stacks& stacks_;
  const TokenVocab& vocab_;
  std::vector<StackSet> states_;     // states_[d]: after the first d bytes of the previous token
  std::vector<uint8_t> popped_any_;  // popped_any_[d]: some state in 1..d popped
  const std::string* prev_ = nullptr;
  size_t computed_ = 0;              // states_[0 .. computed_] are valid for prev_
  size_t dead_ = 0;                  // > 0: states_[dead_] is empty (prev_'s prefix of that length dies)
};

}  // namespace engine::grammar
