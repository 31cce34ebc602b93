// A mixture-of-experts layer's MLP read from the checkpoint names the published checkpoints use: Qwen2-MoE /
// Qwen3-MoE `mlp.gate` + `mlp.experts.N.{gate,up,down}_proj` (+ `mlp.shared_expert.*`, `mlp.shared_expert_gate`),
// Mixtral `block_sparse_moe.gate` + `block_sparse_moe.experts.N.{w1,w3,w2}` — this rank's experts and columns only.
#pragma once
#include <string>

#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/model-config.h"
#include "parallel/parallel-layout.h"

namespace engine {

// `layer`: "model.layers.N.".
MoeWeights read_moe_weights(WeightReader& r, const std::string& layer, const ModelConfig& c, const ParallelLayout& pl);

}  // namespace engine
