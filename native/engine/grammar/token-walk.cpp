#include "grammar/token-walk.h"

#include <algorithm>
#include <string_view>

namespace engine::grammar {

namespace {

// Past this many distinct states a walk stops keeping new ones (their transitions are advanced each time).
constexpr size_t kMaxInterned = 1 << 18;
constexpr size_t kDenseStates = 1024;

uint64_t hash_of(const StackSet& s) {
  uint64_t h = 1469598103934665603ull ^ (static_cast<uint64_t>(s.accepting) << 1) ^ static_cast<uint64_t>(s.popped);
  for (int32_t n : s.nodes) h = (h ^ static_cast<uint32_t>(n)) * 1099511628211ull;
  return h;
}

bool same(const StackSet& a, const StackSet& b) {
  return a.accepting == b.accepting && a.popped == b.popped && a.nodes == b.nodes;
}

}  // namespace

TokenWalk::TokenWalk(Stacks& stacks, const TokenVocab& vocab, const StackSet& start)
    : stacks_(stacks), vocab_(vocab), popped_any_(1, 0) {
  StackSet first = start;
  states_.push_back(intern(std::move(first)));
}

int32_t TokenWalk::intern(StackSet&& s) {
  const uint64_t h = hash_of(s);
  auto& ids = by_hash_[h];
  for (int32_t id : ids)
    if (same(interned_[static_cast<size_t>(id)], s)) return id;
  const auto id = static_cast<int32_t>(interned_.size());
  interned_.push_back(std::move(s));
  ids.push_back(id);
  return id;
}

int32_t TokenWalk::next_state(int32_t from, uint8_t b) {
  // The first kDenseStates states' transitions in a table (a loop's few states take nearly every step), the rest in
  // a map.
  const bool dense = static_cast<size_t>(from) < kDenseStates;
  if (dense) {
    if (dense_.size() <= static_cast<size_t>(from) * 256) dense_.resize((static_cast<size_t>(from) + 1) * 256, -1);
    const int32_t to = dense_[static_cast<size_t>(from) * 256 + b];
    if (to >= 0) return to;
  }
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 8) | b;
  if (!dense) {
    const auto it = transitions_.find(key);
    if (it != transitions_.end()) return it->second;
  }
  // (advance reads its input by reference: the result goes to scratch_ before interned_ may grow)
  stacks_.advance(interned_[static_cast<size_t>(from)], b, scratch_);
  if (interned_.size() >= kMaxInterned) {  // the table is full: keep this state alone, unshared
    interned_.push_back(std::move(scratch_));
    scratch_ = StackSet{};
    return static_cast<int32_t>(interned_.size()) - 1;
  }
  const int32_t to = intern(std::move(scratch_));
  scratch_ = StackSet{};
  if (dense) dense_[static_cast<size_t>(from) * 256 + b] = to;
  else transitions_.emplace(key, to);
  return to;
}

int32_t TokenWalk::next_live_rank(int32_t rank) const {
  if (dead_ == 0 || prev_rank_ != rank || prev_.size() < dead_) return rank + 1;
  return vocab_.subtree_end(rank, dead_);  // (the ranks after `rank` that share the dead prefix, skipped at once)
}

TokenOutcome TokenWalk::step(int32_t rank) {
  const std::string_view t = vocab_.sorted_bytes(rank);
  size_t common = 0;
  if (prev_rank_ >= 0) {
    if (rank == prev_rank_ + 1) {
      common = static_cast<size_t>(vocab_.common_with_previous(rank));
    } else {
      const size_t n = std::min(prev_.size(), t.size());
      while (common < n && prev_[common] == t[common]) ++common;
    }
  }
  prev_ = t;
  prev_rank_ = rank;
  TokenOutcome out;
  if (dead_ > 0 && common >= dead_) {  // under a prefix that already died
    out.popped_before = popped_any_[dead_] != 0;
    return out;
  }
  dead_ = 0;
  size_t d = std::min(common, computed_);
  if (states_.size() < t.size() + 1) {
    states_.resize(t.size() + 1);
    popped_any_.resize(t.size() + 1);
  }
  for (; d < t.size(); ++d) {
    states_[d + 1] = next_state(states_[d], static_cast<uint8_t>(t[d]));
    const StackSet& next = interned_[static_cast<size_t>(states_[d + 1])];
    popped_any_[d + 1] = static_cast<uint8_t>(popped_any_[d] || next.popped);
    if (next.empty() && d + 1 < t.size()) {
      computed_ = dead_ = d + 1;
      out.popped_before = popped_any_[dead_] != 0;
      return out;
    }
  }
  computed_ = t.size();
  const StackSet& end = interned_[static_cast<size_t>(states_[t.size()])];
  out.consumed = true;
  out.alive = !end.empty() || end.accepting || end.popped;
  out.popped_before = popped_any_[t.size() - 1] != 0;
  if (end.empty()) dead_ = t.size();
  return out;
}

}  // namespace engine::grammar
