// Runs the matcher over tokens taken in byte order (TokenVocab::sorted ranks, ascending), reusing the states along
// each token's common prefix with the one before and skipping every token under a prefix no stack survives: the
// work of a trie walk without a trie. States are interned and the transitions taken kept (a lazy DFA over the
// walk): in a loop — a string's characters, a number's digits — the state after a byte is one met before, so most
// bytes of a whole-vocabulary walk are a table lookup instead of an advance of the stacks.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
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
  // vocabulary, which then skip a dead subtree at once (TokenVocab::subtree_end).
  int32_t next_live_rank(int32_t rank) const;
  // The stacks after the last step's token (when it was consumed).
  const StackSet& state_after() const { return interned_[static_cast<size_t>(states_[computed_])]; }
  // Whether the tokens skipped that way popped before their prefix died (their outcome's popped_before).
  bool dead_prefix_popped() const { return dead_ > 0 && popped_any_[dead_] != 0; }

 private:
  int32_t intern(StackSet&& s);
  int32_t next_state(int32_t from, uint8_t b);

  Stacks& stacks_;
  const TokenVocab& vocab_;
  std::vector<StackSet> interned_;                       // distinct states met, by id
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash_;  // content hash -> ids with that hash
  std::vector<int32_t> dense_;                          // [state id * 256 + byte] -> state id (-1: not yet)
  std::unordered_map<uint64_t, int32_t> transitions_;   // past the dense states: (state id << 8 | byte) -> state id
  StackSet scratch_;
  std::vector<int32_t> states_;      // states_[d]: the state id after the first d bytes of the previous token
  std::vector<uint8_t> popped_any_;  // popped_any_[d]: some state in 1..d popped
  std::string_view prev_;            // the previous step's token
  int32_t prev_rank_ = -2;           // its rank (-2: none yet)
  size_t computed_ = 0;              // states_[0 .. computed_] are valid for prev_
  size_t dead_ = 0;                  // > 0: states_[dead_] is empty (prev_'s prefix of that length dies)
};

}  // namespace engine::grammar
