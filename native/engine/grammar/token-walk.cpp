#include "grammar/token-walk.h"

#include <algorithm>
#include <string_view>

namespace engine::grammar {

TokenWalk::TokenWalk(Stacks& stacks, const TokenVocab& vocab, const StackSet& start)
    : stacks_(stacks), vocab_(vocab), states_(1, start), popped_any_(1, 0) {}

int32_t TokenWalk::next_live_rank(int32_t rank) const {
  if (dead_ == 0 || prev_ == nullptr || prev_->size() < dead_) return rank + 1;
  const std::string_view prefix(prev_->data(), dead_);
  const auto& sorted = vocab_.sorted();
  const auto first = sorted.begin() + rank + 1;
  const auto end = std::partition_point(first, sorted.end(), [&](int32_t id) {
    return std::string_view(vocab_.bytes(id)).substr(0, prefix.size()) == prefix;
  });
  return static_cast<int32_t>(end - sorted.begin());
}

TokenOutcome TokenWalk::step(int32_t rank) {
  const std::string& t = vocab_.bytes(vocab_.sorted()[static_cast<size_t>(rank)]);
  size_t common = 0;
  if (prev_ != nullptr) {
    const size_t n = std::min(prev_->size(), t.size());
    while (common < n && (*prev_)[common] == t[common]) ++common;
  }
  prev_ = &t;
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
    stacks_.advance(states_[d], static_cast<uint8_t>(t[d]), states_[d + 1]);
    popped_any_[d + 1] = static_cast<uint8_t>(popped_any_[d] || states_[d + 1].popped);
    if (states_[d + 1].empty() && d + 1 < t.size()) {
      computed_ = dead_ = d + 1;
      out.popped_before = popped_any_[dead_] != 0;
      return out;
    }
  }
  computed_ = t.size();
  const StackSet& end = states_[t.size()];
  out.consumed = true;
  out.alive = !end.empty() || end.accepting || end.popped;
  out.popped_before = popped_any_[t.size() - 1] != 0;
  if (end.empty()) dead_ = t.size();
  return out;
}

}  // namespace engine::grammar
