#include "grammar/grammar-matcher.h"

#include <algorithm>
#include <climits>

#include "grammar/token-walk.h"

namespace engine::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> stop_ids)
    : grammar_(std::move(grammar)), stop_ids_(std::move(stop_ids)), stacks_(grammar_->grammar(), pool_) {
  const Grammar& g = grammar_->grammar();
  StackSet all;
  for (int32_t start : g.starts(g.root)) {
    stacks_.expand(start, kBottom, scratch_);
    all.nodes.insert(all.nodes.end(), scratch_.nodes.begin(), scratch_.nodes.end());
    all.accepting = all.accepting || scratch_.accepting;
  }
  std::sort(all.nodes.begin(), all.nodes.end());
  all.nodes.erase(std::unique(all.nodes.begin(), all.nodes.end()), all.nodes.end());
  state_ = std::move(all);
}

void GrammarMatcher::fill_mask(std::vector<uint64_t>& mask) {
  const TokenVocab& vocab = grammar_->vocab();
  if (!stopped_ && memo_valid_ && memo_accepting_ == state_.accepting && memo_nodes_ == state_.nodes) {
    mask = memo_mask_;
    return;
  }
  mask.assign(vocab.mask_words(), 0);
  if (stopped_) return;
  auto set = [&mask](int32_t id) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  // The positions on top of the stacks: their precomputed accepted tokens, and their uncertain ones to check.
  tops_.clear();
  for (int32_t n : state_.nodes) tops_.push_back(pool_.at(n).pos);
  std::sort(tops_.begin(), tops_.end());
  tops_.erase(std::unique(tops_.begin(), tops_.end()), tops_.end());
  uncertain_.clear();
  for (int32_t pos : tops_) {
    const PositionMask& pm = grammar_->position_mask(pos);
    if (!pm.accepted_bits.empty()) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= pm.accepted_bits[w];
    }
    for (int32_t id : pm.accepted_ids) set(id);
    uncertain_.insert(uncertain_.end(), pm.uncertain.begin(), pm.uncertain.end());
  }
  if (tops_.size() > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }
  if (!uncertain_.empty()) {
    TokenWalk walk(stacks_, vocab, state_);
    for (int32_t rank : uncertain_) {
      const int32_t id = vocab.sorted()[static_cast<size_t>(rank)];
      if (mask[static_cast<size_t>(id) >> 6] >> (id & 63) & 1u) continue;  // another stack accepts it anyway
      if (walk.step(rank).alive) set(id);
    }
  }
  // A stop id is never content, even where its bytes would fit: only a complete output may end.
  for (int32_t id : stop_ids_) {
    if (id < 0 || id >= vocab.vocab_size()) continue;
    if (state_.accepting) set(id);
    else mask[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
  }
  memo_nodes_ = state_.nodes;
  memo_accepting_ = state_.accepting;
  memo_mask_ = mask;
  memo_valid_ = true;
}

void GrammarMatcher::next_positions(std::vector<int32_t>& out) const {
  if (stopped_) return;
  for (int32_t n : state_.nodes) out.push_back(pool_.at(n).pos);
}

int64_t GrammarMatcher::min_bytes(const StackSet& s) const {
  if (s.accepting) return 0;
  const Grammar& g = grammar_->grammar();
  int64_t best = INT64_MAX;
  for (int32_t id : s.nodes) {
    int64_t n = 0;
    for (int32_t k = id; k >= 0; k = pool_.at(k).parent) n += g.min_suffix_bytes(pool_.at(k).pos);
    best = std::min(best, n);
  }
  return best;
}

std::string GrammarMatcher::shortest_completion(size_t max_bytes) {
  const Grammar& g = grammar_->grammar();
  std::string out;
  StackSet cur = state_;
  StackSet next;
  while (!cur.accepting && out.size() < max_bytes) {
    const int64_t need = min_bytes(cur);
    int chosen = -1;
    for (int32_t id : cur.nodes) {
      int64_t n = 0;
      for (int32_t k = id; k >= 0; k = pool_.at(k).parent) n += g.min_suffix_bytes(pool_.at(k).pos);
      const Position& p = g.positions()[static_cast<size_t>(pool_.at(id).pos)];
      if (n != need || p.kind != Position::bytes) continue;
      const ByteSet& set = g.sets[static_cast<size_t>(p.index)];
      for (int b = 0; b < 256 && chosen < 0; ++b)
        if (set.has(static_cast<uint8_t>(b))) chosen = b;
      if (chosen >= 0) break;
    }
    if (chosen < 0) break;
    stacks_.advance(cur, static_cast<uint8_t>(chosen), next);
    std::swap(cur, next);
    out.push_back(static_cast<char>(chosen));
  }
  return out;
}

void GrammarMatcher::restrict_to_budget(std::vector<uint64_t>& mask, int64_t remaining_tokens,
                                        const std::vector<int32_t>& candidates) {
  if (stopped_) return;
  const int64_t need = min_bytes(state_);
  // Far from the budget, or already past saving: nothing to do.
  if (need + kBudgetWindow < remaining_tokens || need > remaining_tokens + 1) return;
  const TokenVocab& vocab = grammar_->vocab();
  auto allowed = [&](int32_t id) {
    return id >= 0 && id < vocab.vocab_size() && ((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u);
  };
  std::vector<int32_t> ranks;
  for (int32_t id : candidates)
    if (allowed(id) && vocab.rank_of(id) >= 0) ranks.push_back(vocab.rank_of(id));
  std::string prefix;
  for (char c : shortest_completion(static_cast<size_t>(std::max<int64_t>(need, 0)))) {
    prefix.push_back(c);
    const int32_t id = vocab.find(prefix);
    if (allowed(id)) ranks.push_back(vocab.rank_of(id));
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<uint64_t> kept(mask.size(), 0);
  bool any = false;
  TokenWalk walk(stacks_, vocab, state_);
  for (int32_t rank : ranks) {
    const int32_t id = vocab.sorted()[static_cast<size_t>(rank)];
    const TokenOutcome o = walk.step(rank);
    if (!o.alive || min_bytes(walk.state_after()) > remaining_tokens) continue;
    kept[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    any = true;
  }
  for (int32_t id : stop_ids_)  // a stop token (allowed only where the output is complete) ends it: nothing more is needed
    if (allowed(id)) {
      kept[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      any = true;
    }
  if (any) mask = std::move(kept);
}

bool GrammarMatcher::fits_budget(int32_t id, int64_t remaining_tokens) {
  const int64_t need = min_bytes(state_);
  if (stopped_ || need + kBudgetWindow < remaining_tokens || need > remaining_tokens + 1) return true;
  const TokenVocab& vocab = grammar_->vocab();
  if (id < 0 || id >= vocab.vocab_size() || vocab.rank_of(id) < 0) return true;  // a stop token: nothing follows
  TokenWalk walk(stacks_, vocab, state_);
  const TokenOutcome o = walk.step(vocab.rank_of(id));
  return o.alive && min_bytes(walk.state_after()) <= remaining_tokens;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocab& vocab = grammar_->vocab();
  if (stopped_ || id < 0 || id >= vocab.vocab_size()) return false;
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
    if (!state_.accepting) return false;
    stopped_ = true;
    return true;
  }
  const std::string& bytes = vocab.bytes(id);
  if (bytes.empty()) return false;
  StackSet cur = state_;
  for (size_t k = 0; k < bytes.size(); ++k) {
    stacks_.advance(cur, static_cast<uint8_t>(bytes[k]), scratch_);
    std::swap(cur, scratch_);
    if (cur.empty() && !(cur.accepting && k + 1 == bytes.size())) return false;
  }
  state_ = std::move(cur);
  // The masks' walks leave nodes of dead paths in the pool; keep only what the state still uses.
  if (pool_.size() > compact_at_) {
    pool_.compact(state_.nodes);
    memo_valid_ = false;  // node ids were renumbered
    compact_at_ = std::max<size_t>(4096, pool_.size() * 4);
  }
  return true;
}

}  // namespace engine::grammar
