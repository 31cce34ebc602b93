#include "grammar/compiled-grammar.h"

#include <omp.h>

#include <algorithm>

#include "grammar/grammar-stacks.h"
#include "grammar/token-walk.h"

namespace engine::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), masks_(grammar_.positions().size()) {}

PositionMask CompiledGrammar::walk_ranks(int32_t pos, int32_t first, int32_t end) const {
  PositionMask part;
  StackPool pool;
  Stacks stacks(grammar_, pool);
  StackSet start;
  const int32_t rule = grammar_.positions()[static_cast<size_t>(pos)].owner;
  start.nodes.push_back(pool.node(pos, sentinel_of(rule)));
  TokenWalk walk(stacks, *vocab_, start);
  const auto& sorted = vocab_->sorted();
  for (int32_t r = first; r < end;) {
    const TokenOutcome o = walk.step(r);
    if (o.alive) part.accepted_ids.push_back(sorted[static_cast<size_t>(r)]);
    else if (o.popped_before) part.uncertain.push_back(r);
    // Under a dead prefix every token is rejected, or (after a pop) uncertain: skip or list them at once.
    const int32_t next = std::min(end, walk.next_live_rank(r));
    if (walk.dead_prefix_popped())
      for (int32_t k = r + 1; k < next; ++k) part.uncertain.push_back(k);
    r = next;
  }
  return part;
}

void CompiledGrammar::store(int32_t pos, std::unique_ptr<PositionMask> mask) const {
  // A bitset costs mask_words() words to OR in; a list, one bit set per id. Keep whichever is cheaper.
  if (mask->accepted_ids.size() > vocab_->mask_words()) {
    mask->accepted_bits.assign(vocab_->mask_words(), 0);
    for (int32_t id : mask->accepted_ids) mask->accepted_bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    mask->accepted_ids.clear();
    mask->accepted_ids.shrink_to_fit();
  }
  const size_t bytes = mask->accepted_bits.size() * sizeof(uint64_t) +
                       (mask->accepted_ids.size() + mask->uncertain.size()) * sizeof(int32_t);
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = masks_[static_cast<size_t>(pos)];
  if (slot) return;
  slot = std::move(mask);
  mask_bytes_ += bytes;
}

size_t CompiledGrammar::mask_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mask_bytes_;
}

bool CompiledGrammar::has_mask(int32_t pos) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_[static_cast<size_t>(pos)] != nullptr;
}

const PositionMask& CompiledGrammar::position_mask(int32_t pos) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto& slot = masks_[static_cast<size_t>(pos)]) return *slot;
  }
  // Computed outside the lock, so threads compute different cold positions at once; two threads meeting the same
  // new position both compute it, and the first one stored is kept.
  store(pos, std::make_unique<PositionMask>(walk_ranks(pos, 0, static_cast<int32_t>(vocab_->sorted().size()))));
  std::lock_guard<std::mutex> lock(mutex_);
  return *masks_[static_cast<size_t>(pos)];
}

void CompiledGrammar::precompute(std::vector<int32_t> positions, int32_t ranks_per_part) const {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  positions.erase(std::remove_if(positions.begin(), positions.end(), [this](int32_t p) { return has_mask(p); }),
                  positions.end());
  if (positions.empty()) return;
  // Each position's vocabulary in `parts` rank ranges, walked by whichever thread is free; joined in rank order
  // they are exactly the serial walk's lists.
  const int32_t ranks = static_cast<int32_t>(vocab_->sorted().size());
  const int threads = omp_get_max_threads();
  const int32_t parts = std::max(1, std::min(threads * 2, ranks / std::max(1, ranks_per_part)));
  const int items = static_cast<int>(positions.size()) * parts;
  std::vector<PositionMask> done(static_cast<size_t>(items));
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, std::min(items, threads))) if (items > 1)
  for (int k = 0; k < items; ++k) {
    const int32_t pos = positions[static_cast<size_t>(k / parts)];
    const int32_t part = k % parts;
    const int32_t first = static_cast<int32_t>(static_cast<int64_t>(ranks) * part / parts);
    const int32_t end = static_cast<int32_t>(static_cast<int64_t>(ranks) * (part + 1) / parts);
    try {
      done[static_cast<size_t>(k)] = walk_ranks(pos, first, end);
    } catch (...) {  // (out of memory) left to position_mask, which reports it on the executor's thread
      done[static_cast<size_t>(k)].uncertain.push_back(-1);
    }
  }
  for (size_t i = 0; i < positions.size(); ++i) {
    auto mask = std::make_unique<PositionMask>();
    bool failed = false;
    for (int32_t part = 0; part < parts; ++part) {
      PositionMask& d = done[i * static_cast<size_t>(parts) + static_cast<size_t>(part)];
      failed = failed || (!d.uncertain.empty() && d.uncertain.front() < 0);
      mask->accepted_ids.insert(mask->accepted_ids.end(), d.accepted_ids.begin(), d.accepted_ids.end());
      mask->uncertain.insert(mask->uncertain.end(), d.uncertain.begin(), d.uncertain.end());
    }
    if (!failed) store(positions[i], std::move(mask));
  }
}

}  // namespace engine::grammar
