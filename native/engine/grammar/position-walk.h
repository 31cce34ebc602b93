// The walks that compute a grammar position's context-independent mask (compiled-grammar.h): the sorted vocabulary
// run from the position over its rule's unknown caller (a sentinel stack), each token accepted, rejected, or left
// uncertain when the rule ends before the token does and the rest depends on the real stack.
#pragma once
#include <cstdint>
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

struct WalkResult {
  bool complete = true;  // false: stopped early, the mask is incomplete
  int64_t steps = 0;     // tokens stepped (those under a dead prefix are skipped at once): what the walk cost
};

// Ranks [first, end) walked from `pos` (accepted ids and uncertain ranks, in rank order). cut: the walk pops where
// it reaches that position over the unknown caller (Stacks::set_cut; -1: none). Stops early once more than
// max_uncertain ranks are uncertain.
WalkResult walk_position(const Grammar& grammar, const TokenVocab& vocab, int32_t pos, int32_t cut,
                         int32_t first, int32_t end, size_t max_uncertain, PositionMask& out);

// Completes a mask walked with a cut into the position's own (no cut): only the cut walk's uncertain tokens can
// differ — a token that never reached the cut before its last byte meets the same stacks either way — so they alone
// are walked again, from `pos` with every return site followed. Exact, and a fraction of a whole walk.
PositionMask resolve_cut(const Grammar& grammar, const TokenVocab& vocab, int32_t pos, const PositionMask& cut_walk);

}  // namespace engine::grammar
