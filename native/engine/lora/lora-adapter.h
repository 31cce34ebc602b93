// A LoRA adapter as the engine holds it, whole (every layer, every module, no tp slice): per (layer, module) the
// low-rank pair A [rank, in] and B [out, rank], with the adapter's scaling (lora_alpha / r, or / sqrt(r) for
// rsLoRA) already folded into B, so the delta of a projection y = x Wᵀ is y += (x Aᵀ) Bᵀ. Both sources reduce to
// it: Hugging Face PEFT directories (peft-adapter.h) and TensorRT-LLM's lora_weights / lora_config tensors
// (lora-tensors.h). The model keeps only its rank's slice of it (lora-local.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model-config.h"

namespace engine {

// TensorRT-LLM's LoRA module ids (lora_config's first column), the ones a decoder-only model has. Llama-family
// checkpoints map q_proj -> attn_q, k_proj -> attn_k, v_proj -> attn_v, o_proj -> attn_dense, gate_proj ->
// mlp_h_to_4h, up_proj -> mlp_gate, down_proj -> mlp_4h_to_h (TensorRT-LLM's hf_modules_to_trtllm_modules).
enum class LoraModule : int32_t {
  attn_qkv = 0,     // q, k and v rows together: out = q_dim + 2 * kv_dim
  attn_q = 1,
  attn_k = 2,
  attn_v = 3,
  attn_dense = 4,   // o_proj
  mlp_h_to_4h = 5,  // gate_proj (the gated MLP's act() input; a plain MLP's up projection)
  mlp_4h_to_h = 6,  // down_proj
  mlp_gate = 7,     // up_proj (the gated MLP's multiplier)
};
constexpr int32_t kLoraModuleCount = 8;

// "attn_q", ... ; "module_id 9" style text for ids outside the enum is the caller's.
const char* lora_module_name(LoraModule m);
// The PEFT / Hugging Face name of the module ("q_proj", ...; "qkv_proj" for attn_qkv).
const char* lora_module_hf_name(LoraModule m);
// True for 0..7.
bool is_lora_module_id(int32_t id);

// One (layer, module) of an adapter. rank > 0; a.size() == rank * in, b.size() == out * rank.
struct LoraWeight {
  int32_t layer = 0;  // global decoder layer index
  LoraModule module = LoraModule::attn_q;
  int32_t rank = 0;
  int64_t in = 0, out = 0;
  std::vector<float> a;  // [rank, in]
  std::vector<float> b;  // [out, rank], scaling folded in
};

struct LoraAdapter {
  std::vector<LoraWeight> weights;  // at most one per (layer, module)
  size_t bytes() const;             // of a and b, as float32
  int32_t max_rank() const;         // 0 when empty
};

// A module's whole (unsplit) input and output widths in this model: hidden -> q_dim etc. Throws
// EngineError(invalid_argument) for a module the model has not (mlp_gate on a model without a gated MLP).
struct LoraModuleDims {
  int64_t in = 0, out = 0;
};
LoraModuleDims lora_module_dims(const ModelConfig& config, LoraModule m);

// Checks an adapter against the model it is to run on, naming `source` (an adapter name / directory, or
// "lora_weights") with the layer, module and numbers of the first problem: a layer >= num_hidden_layers, a module
// the model lacks, a mixture-of-experts layer's MLP module (experts take no LoRA), in / out widths other than the
// model's, a rank of 0 or above max_rank (lora_cache_max_adapter_size), a (layer, module) given twice, a/b sizes
// that do not match rank x widths, a non-finite value. Throws EngineError(invalid_argument).
void check_lora_adapter(const LoraAdapter& adapter, const ModelConfig& config, int32_t max_rank,
                        const std::string& source);

}  // namespace engine
