#include "grammar/rule-cloning.h"

#include <algorithm>
#include <string>

#include "grammar/graph-components.h"

namespace engine::grammar {
namespace {

// Rules on a reference cycle (a component of more than one rule, or a rule referring to itself).
std::vector<uint8_t> recursive_rules(const std::vector<Rule>& rules) {
  const size_t n = rules.size();
  std::vector<std::vector<int32_t>> refers(n);
  std::vector<uint8_t> recursive(n, 0);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules[r].alternatives)
      for (const Element& e : alt) {
        if (e.kind != Element::rule) continue;
        refers[r].push_back(e.index);
        if (static_cast<size_t>(e.index) == r) recursive[r] = 1;
      }
  const std::vector<int32_t> component = strongly_connected_components(refers);
  std::vector<int32_t> members(n, 0);
  for (int32_t c : component) ++members[static_cast<size_t>(c)];
  for (size_t r = 0; r < n; ++r)
    if (members[static_cast<size_t>(component[r])] > 1) recursive[r] = 1;
  return recursive;
}

// size_of and copy walk the rule graph depth first with an explicit stack of frames, never by recursion: a client's
// grammar may nest rules hundreds of thousands deep (each referring to the next), far more frames than a thread's
// stack holds. A frame's cursor stands at the element its rule goes on from.
struct Cursor {
  size_t alt = 0, element = 0;
  // Moves past finished alternatives; false when no element is left.
  bool at_element(const std::vector<std::vector<Element>>& alts) {
    while (alt < alts.size() && element == alts[alt].size()) {
      ++alt;
      element = 0;
    }
    return alt < alts.size();
  }
};

class Cloner {
 public:
  Cloner(std::vector<Rule>& rules, int32_t root)
      : rules_(rules), root_(root), n0_(rules.size()), recursive_(recursive_rules(rules)), size_(n0_, -1) {
    int64_t elements = 0;
    for (const Rule& r : rules)
      for (const auto& alt : r.alternatives) elements += static_cast<int64_t>(alt.size());
    // Growth budget: the copies may add 64k elements or four times the grammar, and never pass a million in all.
    budget_ = std::min<int64_t>(std::max<int64_t>(65536, 4 * elements), (int64_t{1} << 20) - elements);
  }

  void run() {
    std::vector<int32_t> uses(n0_, 0);
    for (size_t r = 0; r < n0_; ++r) {
      for (size_t a = 0; a < rules_[r].alternatives.size(); ++a) {
        for (size_t k = 0; k < rules_[r].alternatives[a].size(); ++k) {
          const Element e = rules_[r].alternatives[a][k];
          if (e.kind != Element::rule || !clonable(e.index)) continue;
          // The first use keeps the rule itself; each later one gets a copy while the budget lasts.
          if (uses[static_cast<size_t>(e.index)]++ == 0 || budget_ <= 0) continue;
          const int32_t c = copy(e.index);
          rules_[r].alternatives[a][k].index = c;  // (copy grows `rules_`: index again, no reference kept)
        }
      }
    }
  }

 private:
  std::vector<Rule>& rules_;
  const int32_t root_;
  const size_t n0_;                // rules before any copy
  std::vector<uint8_t> recursive_;  // per rule, copies included (never recursive)
  std::vector<int64_t> size_;       // per rule, copies included: size_of, or -1 until asked
  int64_t budget_ = 0;

  // Elements of a non-recursive rule with its non-recursive sub-rules (what one copy costs); a sub-rule met once
  // the count is past the limit is not counted. A reference already redirected to a copy counts the copy, whose
  // size is its original's.
  int64_t size_of(int32_t r) {
    if (size_[static_cast<size_t>(r)] >= 0) return size_[static_cast<size_t>(r)];
    struct Frame {
      int32_t rule;
      Cursor at;
      int64_t count = 0;
    };
    std::vector<Frame> stack{Frame{r, {}}};
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& alts = rules_[static_cast<size_t>(f.rule)].alternatives;
      int32_t descend = -1;
      while (descend < 0 && f.at.at_element(alts)) {
        const Element& e = alts[f.at.alt][f.at.element++];
        ++f.count;
        if (e.kind != Element::rule || recursive_[static_cast<size_t>(e.index)] ||
            f.count > static_cast<int64_t>(kCloneRuleElements))
          continue;
        const int64_t known = size_[static_cast<size_t>(e.index)];
        if (known >= 0) f.count += known;
        else descend = e.index;  // (added when it is done)
      }
      if (descend >= 0) {
        stack.push_back(Frame{descend, {}});  // (f is not used past this point)
        continue;
      }
      const int64_t done = f.count;
      size_[static_cast<size_t>(f.rule)] = done;
      stack.pop_back();
      if (!stack.empty()) stack.back().count += done;
    }
    return size_[static_cast<size_t>(r)];
  }

  bool clonable(int32_t r) {
    return r != root_ && static_cast<size_t>(r) < n0_ && !recursive_[static_cast<size_t>(r)] &&
           size_of(r) <= static_cast<int64_t>(kCloneRuleElements);
  }

  // A copy of rule r, appended to the rules, its clonable sub-rules copied too while the budget lasts (each copy
  // used from the copy alone); returns its index. Sub-rules' copies are appended before the copy that uses them;
  // a copy's name carries the number of rules when it was begun.
  int32_t copy(int32_t r) {
    struct Copy {
      int32_t source;
      Rule rule;
      Cursor at;
    };
    std::vector<Copy> stack;
    auto begin = [&](int32_t s) {
      Copy c{s, {}, {}};
      c.rule.name = rules_[static_cast<size_t>(s)].name + "#" + std::to_string(rules_.size());
      c.rule.alternatives = rules_[static_cast<size_t>(s)].alternatives;
      budget_ -= size_of(s);
      stack.push_back(std::move(c));
    };
    begin(r);
    int32_t made = -1;  // the copy just appended, for the reference its user stands at
    while (!stack.empty()) {
      Copy& c = stack.back();
      auto& alts = c.rule.alternatives;
      if (made >= 0) alts[c.at.alt][c.at.element++].index = made;
      int32_t descend = -1;
      while (descend < 0 && c.at.at_element(alts)) {
        const Element& e = alts[c.at.alt][c.at.element];
        if (e.kind == Element::rule && clonable(e.index) && budget_ > 0) descend = e.index;
        else ++c.at.element;
      }
      if (descend >= 0) {
        made = -1;
        begin(descend);  // (c is not used past this point)
        continue;
      }
      rules_.push_back(std::move(c.rule));
      recursive_.push_back(0);
      size_.push_back(size_of(c.source));
      stack.pop_back();
      made = static_cast<int32_t>(rules_.size() - 1);
    }
    return made;
  }
};

}  // namespace

void clone_shared_rules(std::vector<Rule>& rules, int32_t root) { Cloner(rules, root).run(); }

}  // namespace engine::grammar
