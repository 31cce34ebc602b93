// Llama-family checkpoints (Llama, Mistral, Qwen2): RMSNorm, fused q/k/v with rotary embeddings, GQA, SwiGLU.
#pragma once
#include <memory>

#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

namespace engine {

DecoderSpec llama_spec(const ModelConfig& config);

// This rank's weights from tensors named as in transformers' LlamaForCausalLM ("model.layers.{i}.self_attn.q_proj
// .weight", ...). lm_head is tied to embed_tokens when tie_word_embeddings is set or lm_head.weight is absent.
// Reads only the slices `layout` gives this rank.
DecoderWeights read_llama_weights(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout);

}  // namespace engine
