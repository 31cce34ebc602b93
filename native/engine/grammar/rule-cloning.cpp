#include "grammar/rule-cloning.h"

#include <algorithm>
#include <functional>
#include <string>

namespace engine::grammar {
namespace {

// Rules on a reference cycle (Tarjan's strongly connected components; a rule referring to itself counts).
std::vector<uint8_t> recursive_rules(const std::vector<Rule>& rules) {
  const size_t n = rules.size();
  std::vector<int32_t> index(n, -1), low(n, 0), stack;
  std::vector<uint8_t> on_stack(n, 0), recursive(n, 0);
  int32_t next = 0;
  std::function<void(int32_t)> visit = [&](int32_t v) {
    index[static_cast<size_t>(v)] = low[static_cast<size_t>(v)] = next++;
    stack.push_back(v);
    on_stack[static_cast<size_t>(v)] = 1;
    for (const auto& alt : rules[static_cast<size_t>(v)].alternatives)
      for (const Element& e : alt) {
        if (e.kind != Element::rule) continue;
        const auto w = static_cast<size_t>(e.index);
        if (e.index == v) recursive[static_cast<size_t>(v)] = 1;
        if (index[w] < 0) {
          visit(e.index);
          low[static_cast<size_t>(v)] = std::min(low[static_cast<size_t>(v)], low[w]);
        } else if (on_stack[w]) {
          low[static_cast<size_t>(v)] = std::min(low[static_cast<size_t>(v)], index[w]);
        }
      }
    if (low[static_cast<size_t>(v)] == index[static_cast<size_t>(v)]) {
      std::vector<int32_t> component;
      int32_t w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[static_cast<size_t>(w)] = 0;
        component.push_back(w);
      } while (w != v);
      if (component.size() > 1)
        for (int32_t c : component) recursive[static_cast<size_t>(c)] = 1;
    }
  };
  for (size_t v = 0; v < n; ++v)
    if (index[v] < 0) visit(static_cast<int32_t>(v));
  return recursive;
}

}  // namespace

void clone_shared_rules(std::vector<Rule>& rules, int32_t root) {
  const size_t n0 = rules.size();
  const std::vector<uint8_t> recursive = recursive_rules(rules);
  // Elements of a rule with its non-recursive sub-rules (what one copy costs); capped past the limit.
  std::vector<int64_t> size(n0, -1);
  std::function<int64_t(int32_t)> size_of = [&](int32_t r) -> int64_t {
    int64_t& s = size[static_cast<size_t>(r)];
    if (s >= 0) return s;
    s = 0;
    for (const auto& alt : rules[static_cast<size_t>(r)].alternatives)
      for (const Element& e : alt) {
        ++s;
        if (e.kind == Element::rule && !recursive[static_cast<size_t>(e.index)] && s <= static_cast<int64_t>(kCloneRuleElements))
          s += size_of(e.index);
      }
    return s;
  };
  auto clonable = [&](int32_t r) {
    return r != root && static_cast<size_t>(r) < n0 && !recursive[static_cast<size_t>(r)] &&
           size_of(r) <= static_cast<int64_t>(kCloneRuleElements);
  };
  std::vector<int32_t> uses(n0, 0);
  int64_t elements = 0;
  for (const Rule& r : rules)
    for (const auto& alt : r.alternatives) elements += static_cast<int64_t>(alt.size());
  // Growth budget: the copies may add 64k elements or four times the grammar, and never pass a million in all.
  int64_t budget = std::min<int64_t>(std::max<int64_t>(65536, 4 * elements), (int64_t{1} << 20) - elements);
  std::function<int32_t(int32_t)> copy = [&](int32_t r) -> int32_t {
    Rule c;
    c.name = rules[static_cast<size_t>(r)].name + "#" + std::to_string(rules.size());
    c.alternatives = rules[static_cast<size_t>(r)].alternatives;
    budget -= size_of(r);
    for (auto& alt : c.alternatives)
      for (Element& e : alt)
        if (e.kind == Element::rule && clonable(e.index) && budget > 0) e.index = copy(e.index);
    rules.push_back(std::move(c));
    return static_cast<int32_t>(rules.size() - 1);
  };
  for (size_t r = 0; r < n0; ++r) {
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      for (size_t k = 0; k < rules[r].alternatives[a].size(); ++k) {
        const Element e = rules[r].alternatives[a][k];
        if (e.kind != Element::rule || !clonable(e.index)) continue;
        // The first use keeps the rule itself; each later one gets a copy while the budget lasts.
        if (uses[static_cast<size_t>(e.index)]++ == 0 || budget <= 0) continue;
        const int32_t c = copy(e.index);
        rules[r].alternatives[a][k].index = c;  // (copy may grow `rules`: index again, no reference kept)
      }
    }
  }
}

}  // namespace engine::grammar
