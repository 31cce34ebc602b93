// Canonical ids for what a mask walk from a grammar position can observe, so positions that are copies of one
// another share one context-independent mask (CompiledGrammar) instead of each walking the whole vocabulary.
//
// A position's mask (compiled-grammar.h) depends only on the byte strings of at most `lookahead` bytes (the longest
// token) that the position's continuation can spell: the rest of its alternative, then — where its rule ends into
// the unknown caller — its rule's unique return site (Grammar::unique_return), or "popped". Rule cloning
// (rule-cloning.h) and bounded repetition make many positions whose continuations differ only past that horizon or
// only in which copy of a rule they name: the json-char rule of each `{0,40}` string, per property. The signature is
// that continuation unfolded to `lookahead` bytes and hash-consed, with each referenced rule replaced by its own
// signature to the same depth, so equal ids mean the same observable strings and therefore the same mask.
//
// Exactness: a node's id is its kind, its remaining depth and its children's ids (never a hash alone), and the
// unfolding stops only where no token can still see: after `lookahead` bytes, or past a rule's shortest match when
// that is longer. The pieces that are not byte-exact (a nullable-ref cycle through return sites, or a position whose
// unfolding exceeds the work budget) get no id, and such a position keeps a mask of its own. Nodes are interned in
// a MaskStore, with byte sets by content, so equal ids mean equal walks across the grammars sharing the store.
//
// A walk may also be cut at a position up its return sites (Stacks::set_cut: it pops on reaching it); of(pos, cut)
// is that walk's signature, on the same scale (equal to a whole walk's where they see the same).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask-store.h"

namespace engine::grammar {

class PositionSignatures {
 public:
  // lookahead: the longest token's byte length. The grammar and the store must outlive this.
  PositionSignatures(const Grammar& grammar, int32_t lookahead, MaskStore& store);
  // Allows the next of() calls to unfold `budget` new nodes in all (memoized nodes are free): a signature is worth
  // a fraction of the vocabulary walk it may save, and a position past the budget gets none (it walks, as without
  // sharing) rather than delaying the step that asked.
  void begin(int64_t budget);
  // The signature of a byte-set position as a mask walk starts it (over its rule's unknown caller), or -1 when it
  // has none (the position is then shared with nothing); cut: the walk cut at that position (-1: none; never pos).
  // Memoized across calls; call with the store's mutex held and from one thread at a time.
  int32_t of(int32_t pos, int32_t cut = -1);

 private:
  // The continuation from `pos` with `depth` bytes still observable. returns_to_caller: the alternative's end pops
  // into a caller on a real stack (a rule referenced from inside the walk); otherwise it goes where the rule returns.
  int32_t sequence(int32_t pos, bool returns_to_caller, int32_t depth);
  int32_t rule(int32_t r, int32_t depth);
  int32_t intern(const std::vector<int32_t>& tuple);
  // Rules that are exact copies of one another (rule cloning's), found once so a signature unfolds one copy of each:
  // rep_rule_[r] is the first rule of r's class, canonical_[p] the position at p's offset in that rule.
  void find_copies();

  const Grammar& g_;
  int32_t lookahead_;
  std::vector<int64_t> shortest_;  // the fewest bytes each rule matches
  std::vector<int32_t> rep_rule_;
  std::vector<int32_t> canonical_;
  struct MemoKey {
    uint64_t node;  // kind, index, depth
    int32_t cut;    // the cut, for a walk's own continuation (-1 inside a call: nothing there depends on it)
    bool operator==(const MemoKey& o) const { return node == o.node && cut == o.cut; }
  };
  struct MemoHash {
    size_t operator()(const MemoKey& k) const {
      return static_cast<size_t>((k.node ^ (static_cast<uint64_t>(static_cast<uint32_t>(k.cut)) << 20)) * 0x9e3779b97f4a7c15ull);
    }
  };
  MaskStore& store_;
  std::vector<int32_t> set_ids_;  // the store's id of each of the grammar's byte sets (-1: not asked yet)
  std::unordered_map<MemoKey, int32_t, MemoHash> memo_;  // node -> id; kInProgress while on the call stack
  int32_t cut_ = -1;  // the current of()'s cut
  int64_t budget_ = 0;  // nodes left to unfold since begin()
  int32_t call_depth_ = 0;
};

}  // namespace engine::grammar
