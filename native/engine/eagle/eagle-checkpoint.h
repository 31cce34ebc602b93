// EAGLE draft heads (Li et al., 2024) read from the layout EAGLE-1/2 publishes them in (SafeAILab's cnets.py, read
// the same way by vLLM's llama_eagle.py and TensorRT-LLM's converter): a directory with a LlamaConfig config.json
// (usually num_hidden_layers 1) and model.safetensors with `fc.weight` [hidden, 2 * hidden] (+ `fc.bias`) and the
// decoder layers as `layers.{i}.self_attn.{q,k,v,o}_proj.weight`, `layers.{i}.mlp.{gate,up,down}_proj.weight`,
// `layers.{i}.post_attention_layernorm.weight` (+ input_layernorm past layer 0; a `model.` prefix is taken too).
// The draft reads, beside each token t_{i+1}, the model's hidden state at position i after its final norm:
// fc([embed(t_{i+1}); feature_i]) enters the layers at position i (layer 0 without an input norm), and with no final
// norm the output goes through the model's own LM head to guess t_{i+2}; a guess's output is the next position's
// feature. The embedding and LM head are the model's (read from its checkpoint); an `embed_tokens.weight` in the
// heads' file is left unread, as vLLM leaves it.
// EAGLE-3 heads (LlamaForCausalLMEagle3, Li et al., 2025; the layout EAGLE-3 publishes, read alike by vLLM's
// llama_eagle3.py and SGLang's): slot i reads t_{i+1} and, where the model computed position i, fc of three of the
// model's residual streams ([low; mid; high]: after the layers eagle_config.eagle_aux_hidden_state_layer_ids names,
// as SGLang and TensorRT-LLM read it, or entering layers (2, L // 2, L - 3)); the one layer (`midlayer.`) feeds q/k/v [input_layernorm(embed(t)); hidden_norm(h)] with h as
// the residual, its final norm and LM head over draft_vocab_size ids guess (d2t maps a draft id to the model's:
// id + d2t[id]), and a guess's slot reads the draft's own output before its final norm instead of fc's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"

namespace engine {

// The heads in `dir` as a Model that takes features (Model::takes_features) for the model loaded from `model_dir`
// with `model`'s config, on the CPU with `num_threads` threads (0: all cores). Errors name the file, the tensor or
// field and the values found: EngineError(not_found) for a missing file or tensor, (unsupported) for a pickle-only
// directory or an architecture not read, (bad_checkpoint) for shapes that do not fit the model.
std::unique_ptr<Model> load_eagle_heads(const std::string& dir, const std::string& model_dir, const ModelConfig& model,
                                        int32_t num_threads);

}  // namespace engine
