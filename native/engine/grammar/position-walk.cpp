#include "grammar/position-walk.h"

#include <algorithm>

#include "grammar/grammar-stacks.h"
#include "grammar/token-walk.h"

namespace engine::grammar {
namespace {

StackSet start_of(const Grammar& grammar, StackPool& pool, int32_t pos) {
  StackSet start;
  start.nodes.push_back(pool.node(pos, sentinel_of(grammar.positions()[static_cast<size_t>(pos)].owner)));
  return start;
}

}  // namespace

WalkResult walk_position(const Grammar& grammar, const TokenVocab& vocab, int32_t pos, int32_t cut,
                         int32_t first, int32_t end, size_t max_uncertain, PositionMask& out) {
  WalkResult result;
  StackPool pool;
  Stacks stacks(grammar, pool);
  stacks.set_cut(cut);
  TokenWalk walk(stacks, vocab, start_of(grammar, pool, pos));
  const auto& sorted = vocab.sorted();
  for (int32_t r = first; r < end;) {
    const TokenOutcome o = walk.step(r);
    ++result.steps;
    if (o.alive) out.accepted_ids.push_back(sorted[static_cast<size_t>(r)]);
    else if (o.popped_before) out.uncertain.push_back(r);
    // Under a dead prefix every token is rejected, or (after a pop) uncertain: skip or list them at once.
    const int32_t next = std::min(end, walk.next_live_rank(r));
    if (walk.dead_prefix_popped())
      for (int32_t k = r + 1; k < next; ++k) out.uncertain.push_back(k);
    if (out.uncertain.size() > max_uncertain) {
      result.complete = false;
      break;
    }
    r = next;
  }
  return result;
}

PositionMask resolve_cut(const Grammar& grammar, const TokenVocab& vocab, int32_t pos, const PositionMask& cut_walk) {
  PositionMask out;
  out.accepted_bits = cut_walk.accepted_bits;
  out.accepted_ids = cut_walk.accepted_ids;
  StackPool pool;
  Stacks stacks(grammar, pool);
  TokenWalk walk(stacks, vocab, start_of(grammar, pool, pos));
  std::vector<int32_t> more;
  for (int32_t r : cut_walk.uncertain) {  // (ascending, as TokenWalk needs)
    const TokenOutcome o = walk.step(r);
    if (o.alive) more.push_back(vocab.sorted()[static_cast<size_t>(r)]);
    else if (o.popped_before) out.uncertain.push_back(r);
  }
  if (out.accepted_bits.empty()) {
    out.accepted_ids.insert(out.accepted_ids.end(), more.begin(), more.end());
  } else {
    for (int32_t id : more) out.accepted_bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return out;
}

}  // namespace engine::grammar
