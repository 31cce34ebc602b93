#include "medusa/medusa-tree.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <set>

namespace engine {
namespace {

std::string path_text(const std::vector<int32_t>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + "]";
}

// What check_medusa_choices says, for paths no deeper than max_depth (`why`: what sets that depth).
std::string check_choices(const MedusaChoices& choices, int32_t max_depth, const std::string& why) {
  if (choices.size() > static_cast<size_t>(63)) return std::to_string(choices.size()) + " paths; at most 63";
  std::set<std::vector<int32_t>> seen;
  for (const std::vector<int32_t>& p : choices) {
    if (p.empty()) return "an empty path";
    if (static_cast<int32_t>(p.size()) > max_depth)
      return "path " + path_text(p) + " is " + std::to_string(p.size()) + " deep but " + why;
    for (int32_t r : p)
      if (r < 0 || r >= kMedusaTopK)
        return "path " + path_text(p) + " has rank " + std::to_string(r) + "; ranks are in [0, " +
               std::to_string(kMedusaTopK) + ")";
    if (seen.count(p)) return "path " + path_text(p) + " is listed twice";
    if (p.size() > 1 && !seen.count(std::vector<int32_t>(p.begin(), p.end() - 1)))
      return "path " + path_text(p) + " comes before its parent " + path_text(std::vector<int32_t>(p.begin(), p.end() - 1));
    seen.insert(p);
  }
  return "";
}

}  // namespace

MedusaChoices default_medusa_choices(int32_t num_heads) {
  MedusaChoices all;
  std::vector<int32_t> path;
  std::function<void(int32_t)> grow = [&](int32_t left) {
    for (int32_t r = 0; r <= left; ++r) {
      path.push_back(r);
      all.push_back(path);
      if (static_cast<int32_t>(path.size()) < num_heads) grow(left - r);
      path.pop_back();
    }
  };
  grow(2);
  auto sum = [](const std::vector<int32_t>& p) {
    int32_t s = 0;
    for (int32_t r : p) s += r;
    return s;
  };
  std::stable_sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
    if (sum(a) != sum(b)) return sum(a) < sum(b);
    if (a.size() != b.size()) return a.size() < b.size();
    return a < b;
  });
  return all;
}

std::string check_medusa_choices(const MedusaChoices& choices, int32_t num_heads) {
  return check_choices(choices, num_heads, "there are " + std::to_string(num_heads) + " heads");
}

std::string check_eagle_choices(const MedusaChoices& choices) { return check_choices(choices, INT32_MAX, ""); }

bool TokenTree::is_chain() const {
  for (size_t i = 0; i < parents.size(); ++i)
    if (parents[i] != static_cast<int32_t>(i)) return false;
  return true;
}

ChoiceTree choice_tree(const MedusaChoices& choices, int32_t max_nodes, int32_t max_depth) {
  // The chosen paths (a parent always among them: choices list parents first), as a trie keyed by path.
  std::map<std::vector<int32_t>, std::vector<int32_t>> children;  // path -> its children's last ranks
  int32_t taken = 0;
  for (const std::vector<int32_t>& p : choices) {
    if (taken == max_nodes) break;
    if (static_cast<int32_t>(p.size()) > max_depth) continue;
    children[std::vector<int32_t>(p.begin(), p.end() - 1)].push_back(p.back());
    ++taken;
  }
  ChoiceTree t;
  t.parent.push_back(-1);
  t.rank.push_back(-1);
  t.depth.push_back(0);
  std::vector<int32_t> path;
  std::function<void(int32_t)> visit = [&](int32_t node) {
    auto it = children.find(path);
    if (it == children.end()) return;
    std::vector<int32_t> ranks = it->second;
    std::sort(ranks.begin(), ranks.end());
    for (int32_t r : ranks) {
      t.parent.push_back(node);
      t.rank.push_back(r);
      t.depth.push_back(static_cast<int32_t>(path.size()) + 1);
      path.push_back(r);
      visit(t.size() - 1);
      path.pop_back();
    }
  };
  visit(0);
  return t;
}

TokenTree build_token_tree(const MedusaChoices& choices, const int32_t* top, int32_t max_nodes, int32_t max_depth) {
  const ChoiceTree shape = choice_tree(choices, max_nodes, max_depth);
  TokenTree t;
  std::vector<int32_t> index(static_cast<size_t>(shape.size()), -1);  // shape node -> its node in t (-1: left out)
  index[0] = 0;
  for (int32_t n = 1; n < shape.size(); ++n) {
    const int32_t parent = index[static_cast<size_t>(shape.parent[n])];
    const int32_t token = top[(shape.depth[n] - 1) * kMedusaTopK + shape.rank[n]];  // head depth - 1 guesses it
    if (parent < 0 || token < 0) continue;  // (a vocabulary smaller than the rank: its subtree goes too)
    t.tokens.push_back(token);
    t.parents.push_back(parent);
    index[static_cast<size_t>(n)] = static_cast<int32_t>(t.tokens.size());
  }
  return t;
}

}  // namespace engine
