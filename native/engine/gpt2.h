// GPT-2 checkpoints: learned positions, LayerNorm, Conv1D projections (stored [in, out]), gelu MLP, lm_head tied
// to wte.
#pragma once
#include <memory>

#include "model.h"
#include "parallel-layout.h"
#include "weight-reader.h"

namespace engine {

// Accepts tensor names with or without the "transformer." prefix; ignores the attn.bias / attn.masked_bias
// buffers older exports carry.
// Reads only the slices `layout` gives this rank; the model communicates over options.tp_comm / pp_comm.
std::unique_ptr<Model> load_gpt2(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout,
                                 const LoadOptions& options);

}  // namespace engine
