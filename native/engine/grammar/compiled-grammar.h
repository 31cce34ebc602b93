// A grammar bound to a vocabulary, with the part of each state's token mask that does not depend on the stack below
// (the approach of the XGrammar paper): for every byte-set position, which tokens it accepts whatever called its
// rule, which it rejects whatever called it, and the few whose answer depends on the caller. A matcher then builds
// a step's mask from these and walks only the uncertain tokens with its real stacks. Computed per position on first
// use and kept, so a grammar pays only for the positions its outputs reach.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token-vocab.h"

namespace engine::grammar {

struct PositionMask {
  // Accepted whatever the caller: as a bitset over ids when many, else as a list of ids.
  std::vector<uint64_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;  // ranks (TokenVocab::sorted indices), ascending
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab);
  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  // Thread-safe; computed on first use.
  const PositionMask& position_mask(int32_t pos) const;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<PositionMask>> masks_;
};

}  // namespace engine::grammar
