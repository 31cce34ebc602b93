#include "model/moe-routing.h"

#include <algorithm>
#include <cmath>

namespace engine {

void route_tokens(const float* logits, int64_t rows, int32_t num_experts, int32_t top_k, bool renormalize,
                  int32_t expert_begin, int32_t expert_end, std::vector<ExpertRoute>& routes) {
  routes.resize(static_cast<size_t>(expert_end - expert_begin));
  for (ExpertRoute& r : routes) {
    r.rows.clear();
    r.weights.clear();
  }
  std::vector<double> prob(static_cast<size_t>(num_experts));
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  for (int64_t t = 0; t < rows; ++t) {
    const float* l = logits + t * num_experts;
    const float top = *std::max_element(l, l + num_experts);
    double sum = 0;
    for (int32_t e = 0; e < num_experts; ++e) sum += prob[e] = std::exp(static_cast<double>(l[e]) - top);
    for (int32_t e = 0; e < num_experts; ++e) {
      prob[e] /= sum;
      order[e] = e;
    }
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); });
    double chosen = 0;
    for (int32_t k = 0; k < top_k; ++k) chosen += prob[order[k]];
    for (int32_t k = 0; k < top_k; ++k) {
      const int32_t e = order[k];
      if (e < expert_begin || e >= expert_end) continue;
      ExpertRoute& r = routes[static_cast<size_t>(e - expert_begin)];
      r.rows.push_back(static_cast<int32_t>(t));
      r.weights.push_back(static_cast<float>(renormalize ? prob[e] / chosen : prob[e]));
    }
  }
}

}  // namespace engine
