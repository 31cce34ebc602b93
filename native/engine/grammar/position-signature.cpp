#include "grammar/position-signature.h"

#include <algorithm>
#include <climits>

namespace engine::grammar {
namespace {

constexpr int32_t kNone = -1;        // no signature: the position shares nothing
constexpr int32_t kInProgress = -2;  // memo mark while a node is being unfolded (meeting it again is a cycle)
// Leaves, the same at every depth.
constexpr int32_t kTruncated = 0;  // past the horizon: nothing a token can observe
constexpr int32_t kPopped = 1;     // the analysed rule ends into a caller the walk cannot see
constexpr int32_t kReturns = 2;    // a rule referenced inside the walk ends, back to its real caller
constexpr int32_t kFirstId = 3;
enum Tag : int32_t { tag_bytes = 1, tag_ref = 2, tag_rule = 3 };
enum Node : uint64_t { node_walk_sequence = 0, node_called_sequence = 1, node_rule = 2 };

constexpr int32_t kMaxCallDepth = 2048;       // (recursion along long alternatives of nullable references)
constexpr size_t kMaxMemo = size_t{1} << 20;  // past this, no new signatures (tens of MB at most a grammar)

uint64_t memo_key(Node node, int32_t index, int32_t depth) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(index)) << 32) | (static_cast<uint64_t>(depth) << 2) | node;
}

}  // namespace

PositionSignatures::PositionSignatures(const Grammar& grammar, int32_t lookahead, MaskStore& store)
    : g_(grammar), lookahead_(std::min<int32_t>(lookahead, (1 << 29) - 1)), shortest_(grammar.rules.size(), 0),
      store_(store), set_ids_(grammar.sets.size(), -1) {
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    int64_t best = INT64_MAX;
    for (int32_t start : grammar.starts(static_cast<int32_t>(r))) best = std::min(best, grammar.min_suffix_bytes(start));
    shortest_[r] = best;
  }
  find_copies();
}

void PositionSignatures::find_copies() {
  const size_t n = g_.rules.size();
  // A rule's class: its alternatives' exact layout with each referenced rule's class, hash-consed bottom up. A rule
  // met again while its own class is being found (recursion) is a class of its own (-(r + 1)): such rules are never
  // copied (rule-cloning.h), and a copy that refers to one refers to the same rule.
  std::vector<int32_t> cls(n, 0);
  std::vector<uint8_t> state(n, 0), looped(n, 0);  // state: 0 new, 1 in progress, 2 done
  std::unordered_map<std::vector<int32_t>, int32_t, TupleHash> classes;
  rep_rule_.assign(n, 0);
  std::vector<int32_t> rep_of_class;
  // Depth first without recursion (a chain of many rules must not exhaust the thread's stack): a frame per rule
  // being classed, its alternatives' tuple built as its referenced rules finish.
  auto finish = [&](int32_t r, std::vector<int32_t>&& tuple) {
    const auto ur = static_cast<size_t>(r);
    state[ur] = 2;
    if (looped[ur]) {
      cls[ur] = -(r + 1);
      rep_rule_[ur] = r;
    } else {
      const auto [it, added] = classes.emplace(std::move(tuple), static_cast<int32_t>(classes.size()));
      if (added) rep_of_class.push_back(r);
      cls[ur] = it->second;
      rep_rule_[ur] = rep_of_class[static_cast<size_t>(it->second)];
    }
  };
  struct Frame {
    explicit Frame(int32_t r) : rule(r) {}
    int32_t rule;
    size_t alt = 0, element = 0;
    bool opened = false;  // the alternative's size is in the tuple
    std::vector<int32_t> tuple;
  };
  std::vector<Frame> stack;
  for (size_t root = 0; root < n; ++root) {
    if (state[root] != 0) continue;
    state[root] = 1;
    stack.push_back(Frame{static_cast<int32_t>(root)});
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& alts = g_.rules[static_cast<size_t>(f.rule)].alternatives;
      int32_t descend = -1;
      while (f.alt < alts.size()) {
        const auto& alt = alts[f.alt];
        if (!f.opened) {
          f.tuple.push_back(static_cast<int32_t>(alt.size()));
          f.opened = true;
        }
        if (f.element == alt.size()) {
          ++f.alt;
          f.element = 0;
          f.opened = false;
          continue;
        }
        const Element& e = alt[f.element];
        if (e.kind == Element::bytes) {
          f.tuple.insert(f.tuple.end(), {e.kind, e.index});
        } else if (state[static_cast<size_t>(e.index)] == 2) {
          f.tuple.insert(f.tuple.end(), {e.kind, cls[static_cast<size_t>(e.index)]});
        } else if (state[static_cast<size_t>(e.index)] == 1) {  // met again while being classed: recursion
          looped[static_cast<size_t>(e.index)] = 1;
          f.tuple.insert(f.tuple.end(), {e.kind, -(e.index + 1)});
        } else {
          descend = e.index;
          break;
        }
        ++f.element;
      }
      if (descend >= 0) {
        state[static_cast<size_t>(descend)] = 1;
        stack.push_back(Frame{descend});  // (f is not used past this point)
        continue;
      }
      const int32_t done = f.rule;
      finish(done, std::move(f.tuple));
      stack.pop_back();
      if (!stack.empty()) {
        Frame& parent = stack.back();
        const Element& e = g_.rules[static_cast<size_t>(parent.rule)].alternatives[parent.alt][parent.element];
        parent.tuple.insert(parent.tuple.end(), {e.kind, cls[static_cast<size_t>(done)]});
        ++parent.element;
      }
    }
  }
  // Equal classes have equal layouts, so a position's offset in its rule names the same element in the copy.
  canonical_.resize(g_.positions().size());
  for (size_t p = 0; p < canonical_.size(); ++p) {
    const int32_t owner = g_.positions()[p].owner;
    canonical_[p] = g_.starts(rep_rule_[static_cast<size_t>(owner)])[0] + (static_cast<int32_t>(p) - g_.starts(owner)[0]);
  }
}

void PositionSignatures::begin(int64_t budget) { budget_ = memo_.size() < kMaxMemo ? budget : 0; }

int32_t PositionSignatures::of(int32_t pos, int32_t cut) {
  if (cut == pos) return kNone;  // (a walk never pops at its own start)
  cut_ = cut;
  call_depth_ = 0;
  return sequence(pos, /*returns_to_caller=*/false, lookahead_);
}

int32_t PositionSignatures::intern(const std::vector<int32_t>& tuple) {
  const int32_t id = store_.intern(tuple);
  return id < 0 ? kNone : kFirstId + id;
}

int32_t PositionSignatures::sequence(int32_t pos, bool returns_to_caller, int32_t depth) {
  if (depth < 0) return kTruncated;
  // Inside a call only the rule's structure matters: unfold the first copy of it.
  if (returns_to_caller) pos = canonical_[static_cast<size_t>(pos)];
  if (!returns_to_caller && pos == cut_) return kPopped;  // (as Stacks::set_cut: the walk pops on reaching it)
  const Position& p = g_.positions()[static_cast<size_t>(pos)];
  if (p.kind == Position::end) {
    if (returns_to_caller) return kReturns;
    // As the walk does (grammar-stacks.cpp): an end over the unknown caller goes on at the rule's unique return
    // site when it has one, else the walk records a pop.
    const int32_t site = g_.unique_return(p.owner);
    return site < 0 ? kPopped : sequence(site, false, depth);
  }
  const MemoKey key{memo_key(returns_to_caller ? node_called_sequence : node_walk_sequence, pos, depth),
                   returns_to_caller ? -1 : cut_};
  if (const auto it = memo_.find(key); it != memo_.end()) return it->second == kInProgress ? kNone : it->second;
  if (--budget_ < 0 || call_depth_ >= kMaxCallDepth) return kNone;
  memo_[key] = kInProgress;
  ++call_depth_;
  int32_t id = kNone;
  if (p.kind == Position::bytes) {
    const int32_t next = sequence(pos + 1, returns_to_caller, depth - 1);
    int32_t& set = set_ids_[static_cast<size_t>(p.index)];
    if (set < 0) set = store_.byte_set(g_.sets[static_cast<size_t>(p.index)]);
    if (next != kNone) id = intern({tag_bytes, depth, set, next});
  } else {
    // What follows the referenced rule is seen only after its shortest match, so that much less of it is
    // observable (and nothing when the rule alone fills the horizon).
    const int32_t called = rule(p.index, depth);
    const int64_t shortest = shortest_[static_cast<size_t>(p.index)];
    const int32_t rest_depth = shortest > depth ? -1 : depth - static_cast<int32_t>(shortest);
    const int32_t rest = called == kNone ? kNone : sequence(pos + 1, returns_to_caller, rest_depth);
    if (rest != kNone) id = intern({tag_ref, depth, called, rest});
  }
  --call_depth_;
  // A failure (budget spent, or a cycle) is not kept: a later query goes on from the nodes finished meanwhile.
  if (id == kNone) memo_.erase(key);
  else memo_[key] = id;
  return id;
}

int32_t PositionSignatures::rule(int32_t r, int32_t depth) {
  r = rep_rule_[static_cast<size_t>(r)];
  const MemoKey key{memo_key(node_rule, r, depth), -1};
  if (const auto it = memo_.find(key); it != memo_.end()) return it->second == kInProgress ? kNone : it->second;
  if (--budget_ < 0 || call_depth_ >= kMaxCallDepth) return kNone;
  memo_[key] = kInProgress;
  ++call_depth_;
  // A rule matches the union of its alternatives: their signatures as a sorted set, so order and duplicates (two
  // copies of one alternative) do not matter.
  std::vector<int32_t> tuple{tag_rule, depth};
  bool ok = true;
  for (int32_t start : g_.starts(r)) {
    const int32_t alt = sequence(start, /*returns_to_caller=*/true, depth);
    if (alt == kNone) { ok = false; break; }
    tuple.push_back(alt);
  }
  int32_t id = kNone;
  if (ok) {
    std::sort(tuple.begin() + 2, tuple.end());
    tuple.erase(std::unique(tuple.begin() + 2, tuple.end()), tuple.end());
    id = intern(tuple);
  }
  --call_depth_;
  if (id == kNone) memo_.erase(key);
  else memo_[key] = id;
  return id;
}

}  // namespace engine::grammar
