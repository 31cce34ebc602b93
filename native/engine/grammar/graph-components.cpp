#include "grammar/graph-components.h"

#include <algorithm>

namespace engine::grammar {

std::vector<int32_t> strongly_connected_components(const std::vector<std::vector<int32_t>>& edges) {
  const size_t n = edges.size();
  std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1), stack;
  std::vector<uint8_t> on_stack(n, 0);
  int32_t next_index = 0, next_component = 0;
  // The depth-first path: a node, and how many of its edges it has followed.
  std::vector<std::pair<int32_t, size_t>> path;
  auto enter = [&](int32_t v) {
    index[static_cast<size_t>(v)] = low[static_cast<size_t>(v)] = next_index++;
    stack.push_back(v);
    on_stack[static_cast<size_t>(v)] = 1;
    path.emplace_back(v, 0);
  };
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    enter(static_cast<int32_t>(start));
    while (!path.empty()) {
      const auto v = static_cast<size_t>(path.back().first);
      const size_t e = path.back().second++;
      if (e < edges[v].size()) {
        const int32_t w = edges[v][e];
        if (index[static_cast<size_t>(w)] < 0) enter(w);
        else if (on_stack[static_cast<size_t>(w)]) low[v] = std::min(low[v], index[static_cast<size_t>(w)]);
        continue;
      }
      if (low[v] == index[v]) {  // v roots a component: it is what the stack holds from v up
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = 0;
          component[static_cast<size_t>(w)] = next_component;
        } while (static_cast<size_t>(w) != v);
        ++next_component;
      }
      path.pop_back();
      if (!path.empty()) {
        const auto parent = static_cast<size_t>(path.back().first);
        low[parent] = std::min(low[parent], low[v]);
      }
    }
  }
  return component;
}

}  // namespace engine::grammar
