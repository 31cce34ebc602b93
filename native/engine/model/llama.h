// Llama-family checkpoints (Llama, Mistral, Qwen2): RMSNorm, fused q/k/v with rotary embeddings, GQA, SwiGLU.
#pragma once
#include <memory>
#include <string>

#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

namespace engine {

DecoderSpec llama_spec(const ModelConfig& config);

// Where the tensors are: transformers' LlamaForCausalLM ("model.layers.{i}.self_attn.q_proj.weight", ...), or an
// EAGLE draft's layers ("layers.{i}..." after `prefix`), whose first layer has no input norm and which keeps no
// embedding, final norm or LM head of its own (eagle/eagle-checkpoint.h). EAGLE-3's one layer is `layer` after
// `prefix` ("midlayer." as published, or "layers.0."): its input norm is on the token's embedding, `hidden_norm`
// on the hidden input, and q/k/v read both ([q, 2 * hidden]); final norm and LM head are read by the caller.
struct LlamaTensors {
  bool eagle = false;
  std::string prefix;  // before "layers." in an EAGLE draft ("" or "model.")
  bool eagle3 = false;
  std::string layer;   // EAGLE-3: the layer's name after prefix
};

// This rank's weights. lm_head is tied to embed_tokens when tie_word_embeddings is set or lm_head.weight is absent.
// Reads only the slices `layout` gives this rank.
DecoderWeights read_llama_weights(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout,
                                  const LlamaTensors& names = {});

}  // namespace engine
