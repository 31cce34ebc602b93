// Hugging Face PEFT LoRA adapters on disk: adapter_config.json + adapter_model.safetensors (or adapter_model.bin,
// which is refused with the reason: pickles are not read). What is read: r, lora_alpha, use_rslora, rank_pattern /
// alpha_pattern (per-module ranks and alphas, keys matched against the module path as PEFT does: the full key or
// a suffix after a '.', or a regex), target_modules (a list or a regex string; only for the message when the file
// holds no LoRA weights). fan_in_fan_out and layers_to_transform are not needed: PEFT stores lora_A / lora_B as
// nn.Linear weights even on Conv1D bases (fan_in_fan_out transposes only its merged delta), and the tensors present
// say which layers are adapted. Refused with the reason: peft_type other than LORA, use_dora, bias other than
// "none", lora_bias, modules_to_save, several adapter names in one file, tensors of modules the engine has no LoRA
// module for (embed_tokens, lm_head, mixture-of-experts experts, routers).
// Tensor names: base_model.model.model.layers.<l>.(self_attn|mlp).<module>.lora_(A|B)[.<adapter name>].weight
// (GPT-2: base_model.model.transformer.h.<l>.(attn|mlp).<c_attn|c_proj|c_fc>...), in f32, f16 or bf16. Phi-3's
// gate_up_proj becomes two weights (mlp_h_to_4h: B's first half of rows, mlp_gate: the second, one A).
#pragma once
#include <string>

#include "lora/lora-adapter.h"
#include "model/model-config.h"

namespace engine {

// Reads the adapter in `dir` for a model of `config` and checks it (check_lora_adapter with `max_rank`). Throws
// EngineError naming the file, tensor or key and the numbers.
LoraAdapter load_peft_adapter(const std::string& dir, const ModelConfig& config, int32_t max_rank);

}  // namespace engine
