// Which tokens go to which experts (pure): the router's softmax over all experts, the top k per token (ties to the
// lower expert index), their probabilities as weights, renormalised to sum to 1 when the config says so — the
// routing transformers' Qwen2-MoE, Qwen3-MoE and Mixtral compute.
#pragma once
#include <cstdint>
#include <vector>

namespace engine {

// The rows of a batch routed to one expert and the weight each row's output gets.
struct ExpertRoute {
  std::vector<int32_t> rows;
  std::vector<float> weights;
};

// logits: [rows, num_experts]. routes gets one entry per expert in [expert_begin, expert_end) (a rank's experts),
// listing the rows that chose it in ascending order.
void route_tokens(const float* logits, int64_t rows, int32_t num_experts, int32_t top_k, bool renormalize,
                  int32_t expert_begin, int32_t expert_end, std::vector<ExpertRoute>& routes);

}  // namespace engine
