// A grammar bound to a vocabulary, with the part of each state's token mask that does not depend on the stack below
// (the approach of the XGrammar paper): for every byte-set position, which tokens it accepts whatever called its
// rule, which it rejects whatever called it, and the few whose answer depends on the caller. A matcher then builds
// a step's mask from these and walks only the uncertain tokens with its real stacks. Computed per position on first
// use and kept, so a grammar pays only for the positions its outputs reach. Positions whose walks see the same
// strings as far as the longest token reaches (copies of one rule: position-signature.h) share one mask, within the
// grammar and with the other grammars of its MaskStore; where only what follows a return site differs, one walk cut
// there is shared and each position walks again only the tokens that reached the cut (compiled-grammar.cpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask-store.h"
#include "grammar/position-walk.h"
#include "grammar/token-vocab.h"

namespace engine::grammar {

class BackgroundMasks;
class PositionSignatures;

struct CompiledGrammarOptions {
  // Equal positions share masks. Off: every position walks the vocabulary itself (what tests compare against).
  bool share_equal_positions = true;
  // Shared with the other grammars of the same vocabulary (GrammarCache's); null: this grammar's own.
  std::shared_ptr<MaskStore> store;
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, CompiledGrammarOptions options = {});
  ~CompiledGrammar();
  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  // Thread-safe; computed on first use (outside the lock: threads compute different positions at once).
  const PositionMask& position_mask(int32_t pos) const;
  bool has_mask(int32_t pos) const;
  // Bytes of the masks this grammar walked (bitsets and id lists), whether kept in the store or by itself.
  size_t mask_bytes() const;
  // Walks of the whole vocabulary this grammar made (positions that took a shared mask, or completed a shared cut
  // walk, made none).
  size_t vocabulary_walks() const;
  // Positions completed from a shared cut walk (a walk of only the tokens that reached the cut).
  size_t completed_from_cuts() const;
  // Computes the masks of `positions` not computed yet, each position's vocabulary split into rank ranges walked on
  // OpenMP threads: a position met for the first time costs a walk of the whole vocabulary (~100 ms at 128k
  // tokens on one core), which a batch would otherwise wait for on one thread.
  // ranks_per_part: the fewest tokens a range holds (small vocabularies are not worth splitting).
  void precompute(std::vector<int32_t> positions, int32_t ranks_per_part = 1024) const;
  // The same on the calling thread alone (background-masks.h: no OpenMP region beside the executor's).
  void compute_serial(std::vector<int32_t> positions) const;
  // True while the background thread (background-masks.h) has yet to finish this guide's positions and the guide is
  // worth waiting for: the executor keeps its requests queued meanwhile. Lock-free, since the loop asks it of every
  // queued guided request each iteration; once false it stays false.
  bool masks_pending() const { return masks_pending_.load(std::memory_order_acquire); }

 private:
  // The masks of `positions`, in rounds (compiled-grammar.cpp); parallel: walks split over OpenMP threads.
  void compute(std::vector<int32_t> positions, int32_t ranks_per_part, bool parallel) const;
  // Under mutex_: `mask` as pos's (kept in the store under `signature` when it has one, else by this grammar).
  const PositionMask* keep_locked(int32_t signature, std::unique_ptr<PositionMask> mask) const;
  // Under mutex_: pos's signature (-1: none), and its slot filled from the store's mask for it when there is one.
  int32_t share_locked(int32_t pos) const;
  // The positions where a walk from pos may be cut (Stacks::set_cut), innermost first: each unique return site up
  // its chain and, where that site is a byte, the position past it.
  std::vector<int32_t> cuts_of(int32_t pos) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::shared_ptr<MaskStore> store_;                          // null: sharing off
  mutable std::mutex mutex_;                                  // (taken before the store's, never after)
  mutable std::vector<const PositionMask*> masks_;           // by position; null: not computed yet
  mutable std::vector<std::unique_ptr<PositionMask>> owned_;  // masks not kept in the store
  mutable std::unique_ptr<PositionSignatures> signatures_;
  mutable size_t mask_bytes_ = 0;
  mutable size_t vocabulary_walks_ = 0;
  mutable size_t completed_from_cuts_ = 0;
  // Set and cleared by BackgroundMasks alone (a property of its work on this guide, not of the grammar).
  friend class BackgroundMasks;
  mutable std::atomic<bool> masks_pending_{false};
};

}  // namespace engine::grammar
