// TensorRT-LLM's LoRA request tensors (the seeds' lora_weights / lora_config inputs; hf_lora_convert.py writes
// them): lora_config [rows, 3] int32 of (module_id, layer_idx, adapter_size r); lora_weights [rows, cols] where
// row i holds module i's A as [r, in] (r * in values, in its "in" width) followed by its B as [out, r] (out * r
// values), the rest of the row padding. The scaling is already in B (TensorRT-LLM's converter multiplies it in).
// A leading batch dimension of 1 is the caller's to drop.
#pragma once
#include <cstdint>

#include "lora/lora-adapter.h"
#include "model/model-config.h"

namespace engine {

// Throws EngineError(invalid_argument) naming lora_config / lora_weights, the row and the numbers: rows that differ
// between the two, config_cols != 3, an unknown module_id, a row too short for r * (in + out) values, then
// check_lora_adapter's problems with source "lora_weights".
LoraAdapter lora_from_tensors(const ModelConfig& config, int32_t max_rank, const float* weights, int64_t rows,
                              int64_t cols, const int32_t* lora_config, int64_t config_rows, int64_t config_cols);

}  // namespace engine
