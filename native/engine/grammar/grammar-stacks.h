// The pushdown automaton's steps over a Grammar: a state is a set of stacks, each a byte-set position on top of the
// positions its rules return to. Stacks are nodes shared through a pool (hash-consed: one node per (position,
// parent)), so a set of stacks is a sorted vector of node ids and equal stacks are equal ids. A reference in tail
// position pushes nothing (its rule returns where the caller does), so loops written as right recursion
// (`R ::= x R | ""`) run in constant stack depth.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"

namespace engine::grammar {

// Bottom of a real stack: the root's caller; an end reached here means the whole output may end.
constexpr int32_t kBottom = -1;
// The unknown caller of rule r while a rule is analysed without its context (token-mask.h).
inline int32_t sentinel_of(int32_t rule) { return -(rule + 2); }
inline bool is_sentinel(int32_t parent) { return parent <= -2; }
inline int32_t sentinel_rule(int32_t parent) { return -parent - 2; }

struct StackNode {
  int32_t pos = 0;     // a byte-set position (the top), or the position to return to (a parent)
  int32_t parent = 0;  // node id, kBottom, or a sentinel
};

class StackPool {
 public:
  int32_t node(int32_t pos, int32_t parent);
  const StackNode& at(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  // Keeps only the nodes reachable from `live` (renumbered in place), so a long generation's pool stays small.
  void compact(std::vector<int32_t>& live);

 private:
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct StackSet {
  std::vector<int32_t> nodes;  // sorted, unique; every node's pos is a byte-set position
  bool accepting = false;      // the root can end here (only with kBottom stacks)
  bool popped = false;         // an analysed rule ended into a caller that is not known (only with sentinels)
  bool empty() const { return nodes.empty(); }
};

class Stacks {
 public:
  Stacks(const Grammar& grammar, StackPool& pool) : g_(grammar), pool_(pool) {}
  // The stacks that begin at `pos` over `parent`: rule references expanded, ends popped.
  void expand(int32_t pos, int32_t parent, StackSet& out);
  // The stacks of `in` whose top accepts byte b, each advanced past it and expanded.
  void advance(const StackSet& in, uint8_t b, StackSet& out);
  // While analysing (sentinel stacks): a stack that reaches position `pos` over an unknown caller pops there, so a
  // mask walk sees only as far as that point of its return sites (a cut walk, shared by copies of a rule whose
  // callers differ: compiled-grammar.cpp). Never the walk's own start. -1: none.
  void set_cut(int32_t pos) { cut_ = pos; }

 private:
  void push(int32_t pos, int32_t parent);
  void run(StackSet& out);

  const Grammar& g_;
  StackPool& pool_;
  int32_t cut_ = -1;
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::vector<uint64_t> seen_small_;
  std::unordered_set<uint64_t> seen_large_;
};

}  // namespace engine::grammar
