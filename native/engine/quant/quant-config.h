// How a checkpoint says its weights are quantized: config.json's `quantization_config` (Hugging Face "fp8" block
// format, compressed-tensors float-quantized) or hf_quant_config.json (NVIDIA ModelOpt). Only FP8 (e4m3) weights
// are accepted; anything else is refused at load naming the key and the value, never run as if unquantized.
// Which tensors are FP8 is read from their dtype (F8_E4M3); this says how their scales are stored and how the
// activations entering them are meant to be quantized.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quant/fp8-matrix.h"

namespace engine {

namespace json {
class Value;
}

enum class QuantMethod : uint8_t { none, hf_fp8, compressed_tensors, modelopt };

struct QuantConfig {
  QuantMethod method = QuantMethod::none;
  std::string source;                         // where it was read, for messages
  Fp8ScaleKind weight_scale = Fp8ScaleKind::tensor;
  int32_t block_rows = 0, block_cols = 0;     // Fp8ScaleKind::block
  std::string scale_suffix = "weight_scale";  // "<module>.weight_scale" ("weight_scale_inv" for HF fp8)
  Fp8Activation activation = Fp8Activation::dynamic_token;
  std::vector<std::string> ignore;            // modules left unquantized, as written (informational)
  bool kv_cache_fp8 = false;                  // kv_cache_quant_algo FP8 / kv_cache_scheme: FP8 KV under "auto"

  bool quantized() const { return method != QuantMethod::none; }
  // "fp8 (compressed-tensors, per-channel weight scales, dynamic per-token activations)"; "" when none.
  std::string describe() const;
};

// From config.json's parsed document (its `quantization_config`) and, when present, <dir>/hf_quant_config.json.
// Throws EngineError(unsupported | bad_checkpoint) naming the file, key and value.
QuantConfig read_quant_config(const json::Value& config_doc, const std::string& config_path, const std::string& dir);

}  // namespace engine
