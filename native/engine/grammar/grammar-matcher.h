// One request's position in its grammar: which tokens may come next (a bitmask over the vocabulary), and the state
// after each accepted token. The executor asks for the mask before sampling and feeds the sampled token back.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled-grammar.h"
#include "grammar/grammar-stacks.h"

namespace engine::grammar {

class GrammarMatcher {
 public:
  // stop_ids: the tokens that end the output (the request's end_id), allowed only where it is complete.
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> stop_ids);

  // mask[id >> 6] bit (id & 63): token id may come next. Resized to the vocabulary's mask_words(). The stop ids are
  // set exactly when the output so far is complete.
  void fill_mask(std::vector<uint64_t>& mask);
  // The grammar positions the next fill_mask reads (the tops of the stacks), appended to `out`: a batch computes
  // the new ones at once, in parallel, before filling (CompiledGrammar::precompute).
  void next_positions(std::vector<int32_t>& out) const;
  const CompiledGrammar& grammar() const { return *grammar_; }
  // Keeps the output completable: when at most `remaining_tokens` tokens may follow the next one, narrows `mask` to
  // tokens after which the guide needs no more bytes than that to be complete (every token is at least one byte,
  // and the vocabulary spells any text one byte at a time). Only `candidates` (the caller's likeliest allowed
  // tokens) and the tokens that spell a prefix of the shortest completion (which always fit) are checked — a few
  // hundred token walks, where checking every allowed token of a 128k vocabulary costs ~100 ms — so a model that
  // would never close a string or stop a number still ends with a complete output at its max_tokens. Checked only
  // when the budget is within reach of the shortest completion (kBudgetWindow bytes); leaves the mask as it was
  // when nothing would remain.
  void restrict_to_budget(std::vector<uint64_t>& mask, int64_t remaining_tokens, const std::vector<int32_t>& candidates);
  // Whether token `id` (allowed by the mask) keeps the output completable in `remaining_tokens` (the rule above, for
  // one token: the executor checks the token it drew, and narrows the mask only when that one does not fit).
  bool fits_budget(int32_t id, int64_t remaining_tokens);
  // The fewest bytes that complete the output from here (0: complete now).
  int64_t min_bytes_to_end() const { return min_bytes(state_); }
  static constexpr int64_t kBudgetWindow = 256;

  // Advances past a token; false (state unchanged) when the grammar does not allow it here. A stop id is accepted
  // only where the output is complete, and ends the matcher.
  bool accept_token(int32_t id);
  // The output so far is a complete match (a stop token may end it here).
  bool can_end() const { return state_.accepting; }
  // Complete, and no byte can follow: the output must end now.
  bool must_end() const { return state_.accepting && state_.empty(); }

 private:
  int64_t min_bytes(const StackSet& s) const;
  // The bytes of a shortest completion from the current state (at most max_bytes): each byte taken from the top of
  // a stack on a shortest path, so each brings the end one byte closer.
  std::string shortest_completion(size_t max_bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<int32_t> stop_ids_;
  StackPool pool_;
  Stacks stacks_;
  StackSet state_;
  StackSet scratch_;
  std::vector<int32_t> tops_;
  std::vector<int32_t> uncertain_;
  // The last mask and the state it was for: a loop (a string's characters, a number's digits) comes back to the
  // same stacks — the same node ids — step after step, and then the mask is the same.
  std::vector<int32_t> memo_nodes_;
  bool memo_accepting_ = false;
  bool memo_valid_ = false;
  std::vector<uint64_t> memo_mask_;
  size_t compact_at_ = 4096;
  bool stopped_ = false;
};

}  // namespace engine::grammar
