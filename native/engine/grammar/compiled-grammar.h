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
  // Thread-safe; computed on first use (outside the lock: threads compute different positions at once).
  const PositionMask& position_mask(int32_t pos) const;
  bool has_mask(int32_t pos) const;
  // Bytes the computed masks hold (bitsets and id lists).
  size_t mask_bytes() const;
  // Computes the masks of `positions` not computed yet, each position's vocabulary split into rank ranges walked on
  // OpenMP threads: a position met for the first time costs a walk of the whole vocabulary (~100 ms at 128k
  // tokens on one core), which a batch would otherwise wait for on one thread.
  // ranks_per_part: the fewest tokens a range holds (small vocabularies are not worth splitting).
  void precompute(std::vector<int32_t> positions, int32_t ranks_per_part = 1024) const;

 private:
  // The walk of ranks [first, end) of the sorted vocabulary from pos (accepted ids, uncertain ranks, in rank order).
  PositionMask walk_ranks(int32_t pos, int32_t first, int32_t end) const;
  void store(int32_t pos, std::unique_ptr<PositionMask> mask) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<PositionMask>> masks_;
  mutable size_t mask_bytes_ = 0;
};

}  // namespace engine::grammar
