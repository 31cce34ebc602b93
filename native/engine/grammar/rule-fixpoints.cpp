#include "grammar/rule-fixpoints.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace engine::grammar {
namespace {

// The alternatives, each with the rule elements it waits on, and per rule the alternatives to revisit once it is
// settled (one entry per occurrence, as each occurrence is one element waited on).
struct Waits {
  explicit Waits(const std::vector<Rule>& rules) : users(rules.size()) {
    for (size_t r = 0; r < rules.size(); ++r)
      for (const auto& alt : rules[r].alternatives) {
        const auto id = static_cast<int32_t>(owner.size());
        owner.push_back(static_cast<int32_t>(r));
        pending.push_back(0);
        bytes.push_back(0);
        for (const Element& e : alt) {
          if (e.kind == Element::bytes) {
            ++bytes.back();
            continue;
          }
          ++pending.back();
          users[static_cast<size_t>(e.index)].push_back(id);
        }
      }
  }
  std::vector<int32_t> owner;               // per alternative: its rule
  std::vector<int32_t> pending;             // per alternative: rule elements not settled yet
  std::vector<int64_t> bytes;               // per alternative: byte elements
  std::vector<std::vector<int32_t>> users;  // per rule: the alternatives that wait on it
};

}  // namespace

std::vector<uint8_t> settled_rules(const std::vector<Rule>& rules, bool nullable) {
  Waits w(rules);
  std::vector<uint8_t> yes(rules.size(), 0);
  std::vector<int32_t> todo;  // rules settled whose users are not revisited yet
  auto settle = [&](size_t alt) {
    const auto r = static_cast<size_t>(w.owner[alt]);
    // (an alternative with a byte can never match the empty string)
    if (w.pending[alt] != 0 || (nullable && w.bytes[alt] > 0) || yes[r]) return;
    yes[r] = 1;
    todo.push_back(static_cast<int32_t>(r));
  };
  for (size_t alt = 0; alt < w.owner.size(); ++alt) settle(alt);
  while (!todo.empty()) {
    const auto r = static_cast<size_t>(todo.back());
    todo.pop_back();
    for (int32_t alt : w.users[r]) {
      --w.pending[static_cast<size_t>(alt)];
      settle(static_cast<size_t>(alt));
    }
  }
  return yes;
}

std::vector<int64_t> shortest_texts(const std::vector<Rule>& rules, int64_t far) {
  // Knuth's generalisation of Dijkstra's shortest paths to grammars: the cheapest alternative whose rules are all
  // settled settles its rule, since every other way to match that rule costs at least as much.
  Waits w(rules);
  std::vector<int64_t> shortest(rules.size(), far);
  std::vector<uint8_t> done(rules.size(), 0);
  using Candidate = std::pair<int64_t, int32_t>;  // an alternative's length, its rule
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> ready;
  for (size_t alt = 0; alt < w.owner.size(); ++alt)
    if (w.pending[alt] == 0) ready.emplace(std::min(far, w.bytes[alt]), w.owner[alt]);
  while (!ready.empty()) {
    const auto [length, rule] = ready.top();
    ready.pop();
    const auto r = static_cast<size_t>(rule);
    if (done[r]) continue;
    done[r] = 1;
    shortest[r] = length;
    for (int32_t alt : w.users[r]) {
      const auto a = static_cast<size_t>(alt);
      w.bytes[a] = std::min(far, w.bytes[a] + length);
      if (--w.pending[a] == 0) ready.emplace(w.bytes[a], w.owner[a]);
    }
  }
  return shortest;
}

}  // namespace engine::grammar
