#include "grammar/compiled-grammar.h"

#include "grammar/grammar-stacks.h"
#include "grammar/token-walk.h"

namespace engine::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), masks_(grammar_.positions().size()) {}

const PositionMask& CompiledGrammar::position_mask(int32_t pos) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = masks_[static_cast<size_t>(pos)];
  if (slot) return *slot;
  auto mask = std::make_unique<PositionMask>();
  StackPool pool;
  Stacks stacks(grammar_, pool);
  StackSet start;
  const int32_t rule = grammar_.positions()[static_cast<size_t>(pos)].owner;
  start.nodes.push_back(pool.node(pos, sentinel_of(rule)));
  TokenWalk walk(stacks, *vocab_, start);
  const auto& sorted = vocab_->sorted();
  for (int32_t r = 0; r < static_cast<int32_t>(sorted.size());) {
    const TokenOutcome o = walk.step(r);
    if (o.alive) mask->accepted_ids.push_back(sorted[static_cast<size_t>(r)]);
    else if (o.popped_before) mask->uncertain.push_back(r);
    // Under a dead prefix every token is rejected, or (after a pop) uncertain: skip or list them at once.
    const int32_t next = walk.next_live_rank(r);
    if (walk.dead_prefix_popped())
      for (int32_t k = r + 1; k < next; ++k) mask->uncertain.push_back(k);
    r = next;
  }
  // A bitset costs mask_words() words to OR in; a list, one bit set per id. Keep whichever is cheaper.
  if (mask->accepted_ids.size() > vocab_->mask_words()) {
    mask->accepted_bits.assign(vocab_->mask_words(), 0);
    for (int32_t id : mask->accepted_ids) mask->accepted_bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    mask->accepted_ids.clear();
    mask->accepted_ids.shrink_to_fit();
  }
  slot = std::move(mask);
  return *slot;
}

}  // namespace engine::grammar
