// How many decoder layers each pipeline stage holds (--pp-layers). Pure.
//   ""         an even split, earlier stages taking the extra layer (TensorRT-LLM's split);
//   "balanced" the contiguous split that minimises the heaviest stage's work per token, counting each layer's
//              weights that a token passes through (attention, the dense MLP or the chosen experts) and the LM
//              head on the last stage for half the tokens (the generated ones, with as many generated as prompt
//              tokens): with pipelined pp the slowest stage sets the pace, and an even split leaves the last stage
//              carrying the head on top of its share (vLLM's VLLM_PP_LAYER_PARTITION, derived);
//   "a,b,..."  exactly these counts, one per stage.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model-config.h"

namespace engine {

// Throws EngineError(invalid_argument) naming --pp-layers and the value when the spec is not one of the above, its
// list does not have pp entries of at least 1, or does not add up to the model's layers.
std::vector<int32_t> pp_stage_layers(const ModelConfig& config, int32_t pp, const std::string& spec);

// The work of layer `layer` and of the LM head per token, in multiply-adds (the units balanced splits compare).
int64_t layer_work(const ModelConfig& config, int32_t layer);
int64_t head_work(const ModelConfig& config);

}  // namespace engine
