// What the grammars compiled for one vocabulary share (GrammarCache keeps one store): the hash-consed nodes of
// position signatures (position-signature.h), so that a signature means the same in every grammar, and the masks
// walked for signatures. A position of a new guide whose signature — whole, or cut at a rule's end — was walked for
// an earlier guide takes that walk instead of walking the vocabulary (a string's characters look the same in every
// schema up to where the string ends). Kept for the store's life, up to a byte budget; past it, new masks stay with
// the grammar that walked them.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/position-walk.h"

namespace engine::grammar {

// A hash of a tuple of ints (signature nodes, rule layouts).
struct TupleHash {
  size_t operator()(const std::vector<int32_t>& v) const;
};

class MaskStore {
 public:
  // long_lived: buckets for every tuple it may hold are made at once (8 MB), so the table never rehashes — a
  // rehash of a large table (ms) would land on whichever request step added the tuple that crossed the load
  // factor. For a store that sees many guides (GrammarCache's); a grammar's own store grows as it goes.
  explicit MaskStore(bool long_lived = false, size_t max_bytes = size_t{256} << 20);
  // Every other member is called with this held (after the grammar's own lock, never before it).
  std::mutex& mutex() const { return mutex_; }
  // Masks are over one vocabulary's ids: the first grammar binds the store to its vocabulary; false for another.
  bool bind(const void* vocabulary);

  // A dense id for a tuple of ints (a signature node) and for a byte set, the same for equal contents. intern: -1
  // once the store holds kMaxTuples (new positions then get no signature: they walk the vocabulary themselves).
  int32_t intern(const std::vector<int32_t>& tuple);
  static constexpr size_t kMaxTuples = size_t{1} << 20;  // (~100 MB of tuples at most)
  int32_t byte_set(const ByteSet& set);

  const PositionMask* find(int32_t signature) const;
  // Keeps `mask` as the walk for `signature` and returns it; null past the byte budget (the mask stays with the
  // caller). An earlier mask for the signature wins.
  const PositionMask* keep(int32_t signature, std::unique_ptr<PositionMask>& mask);
  size_t bytes() const { return bytes_; }

  // Records that the position whose whole signature is `whole` asks for the walk cut to `cut`; true once positions
  // of two different whole signatures have asked (a walk with that cut would serve more than one).
  bool ask(int32_t cut, int32_t whole);
  // Cut walks given up (too many tokens reached the cut), and rules whose whole walks are costly (by the signature
  // with their innermost cut): compiled-grammar.cpp.
  std::unordered_set<int32_t>& shallow() { return shallow_; }
  std::unordered_set<int32_t>& costly() { return costly_; }

 private:
  mutable std::mutex mutex_;
  const void* vocabulary_ = nullptr;
  size_t max_bytes_;
  size_t bytes_ = 0;
  std::unordered_map<std::vector<int32_t>, int32_t, TupleHash> tuples_;
  std::map<std::array<uint64_t, 4>, int32_t> sets_;
  std::unordered_map<int32_t, std::unique_ptr<PositionMask>> masks_;
  std::unordered_set<int32_t> shallow_, costly_;
  std::unordered_map<int32_t, int32_t> askers_;  // cut signature -> the first whole signature asking (-1: two)
};

// Bytes a mask holds (bitset and lists).
size_t mask_size(const PositionMask& mask);

}  // namespace engine::grammar
