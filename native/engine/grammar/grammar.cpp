#include "grammar/grammar.h"

#include <algorithm>

#include "errors.h"
#include "grammar/graph-components.h"
#include "grammar/rule-cloning.h"
#include "grammar/rule-fixpoints.h"

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

}  // namespace

std::vector<uint8_t> nullable_rules(const std::vector<Rule>& rules) { return settled_rules(rules, /*nullable=*/true); }

void Grammar::finalize() {
  clone_shared_rules(rules, root);
  nullable_ = settled_rules(rules, /*nullable=*/true);
  const std::vector<uint8_t> productive = settled_rules(rules, /*nullable=*/false);
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
  // Depth first with an explicit path, not recursion: rules may nest as deep as the grammar is long.
  std::vector<uint8_t> colour(rules.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<std::pair<size_t, size_t>> path;   // a rule on the path, and its next leftmost rule to look at
  for (size_t start = 0; start < rules.size(); ++start) {
    if (colour[start] != 0) continue;
    colour[start] = 1;
    path.emplace_back(start, 0);
    while (!path.empty()) {
      const size_t r = path.back().first;
      const size_t next = path.back().second++;
      if (next == leftmost[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const auto s = static_cast<size_t>(leftmost[r][next]);
      if (colour[s] == 1) {
        refuse("grammar: rule '" + rules[s].name +
               "' is left-recursive (it can refer to itself before matching any character); rewrite it with "
               "repetition, e.g. `list ::= item (\",\" item)*` instead of `list ::= list \",\" item | item`");
      }
      if (colour[s] == 0) {
        colour[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }

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
  // Shortest text of each rule, then of each alternative's suffixes.
  const std::vector<int64_t> shortest = shortest_texts(rules, int64_t{1} << 40);
  min_suffix_.assign(positions_.size(), 0);
  for (size_t p = positions_.size(); p-- > 0;) {
    const Position& q = positions_[p];
    if (q.kind == Position::end) continue;
    min_suffix_[p] = (q.kind == Position::bytes ? 1 : shortest[static_cast<size_t>(q.index)]) + min_suffix_[p + 1];
  }

  // A rule's end returns to the sites of its own references and, through each tail caller, to that caller's: the
  // answer is one site when all those reachable are one and the root is not among the callers. Joined bottom up
  // over the tail-caller graph's components (callers first), once per rule and edge: walking every rule's callers
  // anew was quadratic in a chain of rules, each a tail caller of the next.
  constexpr int32_t kNoSite = -1, kSeveral = -2;
  auto join = [](int32_t& into, int32_t site) {
    if (site == kNoSite || into == site) return;
    into = into == kNoSite ? site : kSeveral;
  };
  const std::vector<int32_t> component = strongly_connected_components(tail_callers);
  std::vector<std::vector<int32_t>> members(rules.size());
  for (size_t r = 0; r < rules.size(); ++r)
    members[static_cast<size_t>(component[r])].push_back(static_cast<int32_t>(r));
  std::vector<int32_t> returns(rules.size(), kNoSite);  // per component
  for (size_t c = 0; c < rules.size(); ++c)
    for (int32_t r : members[c]) {
      if (r == root) join(returns[c], kSeveral);
      for (int32_t site : sites[static_cast<size_t>(r)]) join(returns[c], site);
      for (int32_t caller : tail_callers[static_cast<size_t>(r)])
        join(returns[c], returns[static_cast<size_t>(component[static_cast<size_t>(caller)])]);
    }
  unique_return_.assign(rules.size(), -1);
  for (size_t r = 0; r < rules.size(); ++r)
    unique_return_[r] = std::max(-1, returns[static_cast<size_t>(component[r])]);
}

}  // namespace engine::grammar
