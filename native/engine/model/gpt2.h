// GPT-2 checkpoints: learned positions, LayerNorm, Conv1D projections (stored [in, out]), gelu MLP, lm_head tied
// to wte.
#pragma once
#include <memory>

#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

namespace engine {

// Accepts tensor names with or without the "transformer." prefix; ignores the attn.bias / attn.masked_bias
// buffers older exports carry.
// Reads only the slices `layout` gives this rank.
DecoderSpec gpt2_spec(const ModelConfig& config);
DecoderWeights read_gpt2_weights(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout);

}  // namespace engine
