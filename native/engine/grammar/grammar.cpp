#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "errors.h"
#include "grammar/rule-cloning.h"

namespace engine::grammar {

int32_t Grammar::add_set(const ByteSet& set) {
  for (size_t i = 0; i < sets.size(); ++i)
    if (sets[i] == set) return static_cast<int32_t>(i);
  sets.push_back(set);
  return static_cast<int32_t>(sets.size() - 1);
}

int32_t Grammar::add_rule(std::string name) {
  rules.push_back(Rule{std::move(name), {}});
  return static_cast<int32_t>(rules.size() - 1);
}

namespace {

[[noreturn]] void refuse(const std::string& message) { throw EngineError(ErrorCode::invalid_argument, message); }

// Rules that can match the empty string, and rules that can match anything at all (a fixpoint each).
std::vector<uint8_t> fixpoint(const std::vector<Rule>& rules, bool nullable) {
  std::vector<uint8_t> yes(rules.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (yes[r]) continue;
      for (const auto& alt : rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt)
          if (e.kind == Element::rule ? !yes[static_cast<size_t>(e.index)] : nullable) { all = false; break; }
        if (all) { yes[r] = 1; changed = true; break; }
      }
    }
  }
  return yes;
}

}  // namespace

std::vector<uint8_t> nullable_rules(const std::vector<Rule>& rules) { return fixpoint(rules, /*nullable=*/true); }

void Grammar::finalize() {
  clone_shared_rules(rules, root);
  nullable_ = fixpoint(rules, /*nullable=*/true);
  const std::vector<uint8_t> productive = fixpoint(rules, /*nullable=*/false);
  for (size_t r = 0; r < rules.size(); ++r)
    if (!productive[r]) refuse("grammar: rule '" + rules[r].name + "' can never finish (every alternative refers back to it)");

  // Left recursion: an edge r -> s when s can start r with nothing consumed before it; a cycle would make the
  // matcher expand forever.
  std::vector<std::vector<int32_t>> leftmost(rules.size());
  for (size_t r = 0; r < rules.size(); ++r)
    for (const auto& alt : rules[r].alternatives)
      for (const Element& e : alt) {
        if (e.kind != Element::rule) break;
        leftmost[r].push_back(e.index);
        if (!nullable_[static_cast<size_t>(e.index)]) break;
      }
  std::vector<uint8_t> colour(rules.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::function<void(int32_t)> visit = [&](int32_t r) {
    colour[static_cast<size_t>(r)] = 1;
    for (int32_t s : leftmost[static_cast<size_t>(r)]) {
      if (colour[static_cast<size_t>(s)] == 1) {
        refuse("grammar: rule '" + rules[static_cast<size_t>(s)].name +
               "' is left-recursive (it can refer to itself before matching any character); rewrite it with "
               "repetition, e.g. `list ::= item (\",\" item)*` instead of `list ::= list \",\" item | item`");
      }
      if (colour[static_cast<size_t>(s)] == 0) visit(s);
    }
    colour[static_cast<size_t>(r)] = 2;
  };
  for (size_t r = 0; r < rules.size(); ++r)
    if (colour[r] == 0) visit(static_cast<int32_t>(r));

  positions_.clear();
  starts_.assign(rules.size(), {});
  // Return sites: the position after each non-tail reference; a tail reference from rule t adds t's sites.
  std::vector<std::vector<int32_t>> sites(rules.size());
  std::vector<std::vector<int32_t>> tail_callers(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alt : rules[r].alternatives) {
      starts_[r].push_back(static_cast<int32_t>(positions_.size()));
      for (size_t k = 0; k < alt.size(); ++k) {
        const Element& e = alt[k];
        const auto p = static_cast<int32_t>(positions_.size());
        positions_.push_back(Position{e.kind == Element::bytes ? Position::bytes : Position::rule, e.index,
                                      static_cast<int32_t>(r)});
        if (e.kind != Element::rule) continue;
        if (k + 1 == alt.size()) tail_callers[static_cast<size_t>(e.index)].push_back(static_cast<int32_t>(r));
        else sites[static_cast<size_t>(e.index)].push_back(p + 1);
      }
      positions_.push_back(Position{Position::end, 0, static_cast<int32_t>(r)});
    }
  }
  // Shortest text of each rule (a fixpoint from "unreachable"), then of each alternative's suffixes.
  constexpr int64_t kFar = int64_t{1} << 40;
  std::vector<int64_t> shortest(rules.size(), kFar);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r)
      for (const auto& alt : rules[r].alternatives) {
        int64_t n = 0;
        for (const Element& e : alt) n = std::min(kFar, n + (e.kind == Element::bytes ? 1 : shortest[static_cast<size_t>(e.index)]));
        if (n < shortest[r]) { shortest[r] = n; changed = true; }
      }
  }
  min_suffix_.assign(positions_.size(), 0);
  for (size_t p = positions_.size(); p-- > 0;) {
    const Position& q = positions_[p];
    if (q.kind == Position::end) continue;
    min_suffix_[p] = (q.kind == Position::bytes ? 1 : shortest[static_cast<size_t>(q.index)]) + min_suffix_[p + 1];
  }

  unique_return_.assign(rules.size(), -1);
  for (size_t r = 0; r < rules.size(); ++r) {
    // The distinct sites reachable through tail callers; more than one (or the root among them): none.
    std::vector<int32_t> found;
    std::vector<uint8_t> seen(rules.size(), 0);
    std::vector<int32_t> todo{static_cast<int32_t>(r)};
    bool several = false;
    while (!todo.empty() && !several) {
      const int32_t t = todo.back();
      todo.pop_back();
      if (seen[static_cast<size_t>(t)]) continue;
      seen[static_cast<size_t>(t)] = 1;
      if (t == root) { several = true; break; }
      for (int32_t site : sites[static_cast<size_t>(t)]) {
        if (std::find(found.begin(), found.end(), site) == found.end()) found.push_back(site);
        if (found.size() > 1) { several = true; break; }
      }
      for (int32_t c : tail_callers[static_cast<size_t>(t)]) todo.push_back(c);
    }
    if (!several && found.size() == 1) unique_return_[r] = found[0];
  }
}

}  // namespace engine::grammar
