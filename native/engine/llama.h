// Llama-family checkpoints (Llama, Mistral, Qwen2): RMSNorm, fused q/k/v with rotary embeddings, GQA, SwiGLU.
#pragma once
#include <memory>

#include "model.h"
#include "parallel-layout.h"
#include "weight-reader.h"

namespace engine {

// Builds the model from tensors named as in transformers' LlamaForCausalLM ("model.layers.{i}.self_attn.q_proj
// .weight", ...). lm_head is tied to embed_tokens when tie_word_embeddings is set or lm_head.weight is absent.
// Reads only the slices `layout` gives this rank; the model communicates over options.tp_comm / pp_comm.
std::unique_ptr<Model> load_llama(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout,
                                  const LoadOptions& options);

}  // namespace engine
