// GPT-2 checkpoints: learned positions, LayerNorm, Conv1D projections (stored [in, out]), gelu MLP, lm_head tied
// to wte.
#pragma once
#include <memory>

#include "model.h"
#include "weight-reader.h"

namespace engine {

// Accepts tensor names with or without the "transformer." prefix; ignores the attn.bias / attn.masked_bias
// buffers older exports carry.
std::unique_ptr<Model> load_gpt2(const ModelConfig& config, WeightReader& reader, int32_t num_threads);

}  // namespace engine
