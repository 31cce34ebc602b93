#include "grammar/grammar-stacks.h"

#include <algorithm>

namespace engine::grammar {
namespace {

uint64_t key(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
}

}  // namespace

int32_t StackPool::node(int32_t pos, int32_t parent) {
  const auto [it, inserted] = index_.try_emplace(key(pos, parent), static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back(StackNode{pos, parent});
  return it->second;
}

void StackPool::compact(std::vector<int32_t>& live) {
  std::vector<int32_t> remap(nodes_.size(), -1);
  std::vector<StackNode> kept;
  // Parents before children, so a kept node's parent is renumbered before it is.
  std::vector<int32_t> order;
  for (int32_t id : live) {
    for (int32_t n = id; n >= 0 && remap[static_cast<size_t>(n)] == -1; n = nodes_[static_cast<size_t>(n)].parent) {
      remap[static_cast<size_t>(n)] = -2;
      order.push_back(n);
    }
  }
  std::sort(order.begin(), order.end());  // a parent is always created before its child: ids order them
  index_.clear();
  for (int32_t n : order) {
    StackNode s = nodes_[static_cast<size_t>(n)];
    if (s.parent >= 0) s.parent = remap[static_cast<size_t>(s.parent)];
    remap[static_cast<size_t>(n)] = static_cast<int32_t>(kept.size());
    index_.emplace(key(s.pos, s.parent), static_cast<int32_t>(kept.size()));
    kept.push_back(s);
  }
  nodes_ = std::move(kept);
  for (int32_t& id : live) id = remap[static_cast<size_t>(id)];
}

void Stacks::push(int32_t pos, int32_t parent) { work_.emplace_back(pos, parent); }

void Stacks::run(StackSet& out) {
  const auto& positions = g_.positions();
  seen_small_.clear();
  seen_large_.clear();
  while (!work_.empty()) {
    const auto [pos, parent] = work_.back();
    work_.pop_back();
    const uint64_t k = key(pos, parent);
    // Each (position, parent) once per step: a nullable rule reached twice would otherwise repeat its work.
    if (seen_large_.empty() && seen_small_.size() < 64) {
      if (std::find(seen_small_.begin(), seen_small_.end(), k) != seen_small_.end()) continue;
      seen_small_.push_back(k);
    } else {
      if (seen_large_.empty()) seen_large_.insert(seen_small_.begin(), seen_small_.end());
      if (!seen_large_.insert(k).second) continue;
    }
    if (pos == cut_ && is_sentinel(parent)) {
      out.popped = true;
      continue;
    }
    const Position& p = positions[static_cast<size_t>(pos)];
    switch (p.kind) {
      case Position::bytes:
        out.nodes.push_back(pool_.node(pos, parent));
        break;
      case Position::rule: {
        const bool tail = positions[static_cast<size_t>(pos) + 1].kind == Position::end;
        const int32_t ret = tail ? parent : pool_.node(pos + 1, parent);
        for (int32_t start : g_.starts(p.index)) push(start, ret);
        break;
      }
      case Position::end:
        if (parent == kBottom) {
          out.accepting = true;
        } else if (is_sentinel(parent)) {
          const int32_t u = g_.unique_return(sentinel_rule(parent));
          if (u < 0) out.popped = true;
          else push(u, sentinel_of(positions[static_cast<size_t>(u)].owner));
        } else {
          const StackNode& n = pool_.at(parent);
          push(n.pos, n.parent);
        }
        break;
    }
  }
  std::sort(out.nodes.begin(), out.nodes.end());
  out.nodes.erase(std::unique(out.nodes.begin(), out.nodes.end()), out.nodes.end());
}

void Stacks::expand(int32_t pos, int32_t parent, StackSet& out) {
  out.nodes.clear();
  out.accepting = out.popped = false;
  push(pos, parent);
  run(out);
}

void Stacks::advance(const StackSet& in, uint8_t b, StackSet& out) {
  out.nodes.clear();
  out.accepting = out.popped = false;
  const auto& positions = g_.positions();
  for (int32_t id : in.nodes) {
    const StackNode n = pool_.at(id);
    if (g_.sets[static_cast<size_t>(positions[static_cast<size_t>(n.pos)].index)].has(b)) push(n.pos + 1, n.parent);
  }
  run(out);
}

}  // namespace engine::grammar
