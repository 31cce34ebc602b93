#include "lora/lora-tensors.h"

#include <map>
#include <string>
#include <utility>

#include "errors.h"

namespace engine {

namespace {

std::string s(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& message) { throw EngineError(ErrorCode::invalid_argument, message); }

// TensorRT-LLM's ids past the decoder-only ones: named in the refusal so the sender recognises what it sent.
const char* trtllm_module_name(int32_t id) {
  static const char* const names[] = {"cross_attn_qkv", "cross_attn_q", "cross_attn_k", "cross_attn_v",
                                      "cross_attn_dense", "moe_h_to_4h", "moe_4h_to_h", "moe_gate", "moe_router"};
  return id >= 8 && id <= 16 ? names[id - 8] : nullptr;
}

}  // namespace

LoraAdapter lora_from_tensors(const ModelConfig& config, int32_t max_rank, const float* weights, int64_t rows,
                              int64_t cols, const int32_t* lora_config, int64_t config_rows, int64_t config_cols) {
  if (config_cols != 3)
    fail("lora_config must be [rows, 3] (module_id, layer_idx, adapter_size), got " + s(config_cols) + " columns");
  if (rows != config_rows)
    fail("lora_weights has " + s(rows) + " rows but lora_config has " + s(config_rows) + "; they go row for row");
  if (rows > 0 && cols < 1) fail("lora_weights has " + s(cols) + " columns");

  LoraAdapter adapter;
  std::map<std::pair<int32_t, int32_t>, int64_t> row_of;  // (layer, module id) -> the row that gave it
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t id = lora_config[i * 3], layer = lora_config[i * 3 + 1], rank = lora_config[i * 3 + 2];
    const std::string row = "lora_config row " + s(i) + ": ";
    if (!is_lora_module_id(id)) {
      const char* name = trtllm_module_name(id);
      fail(row + "module_id " + s(id) +
           (name ? std::string(" (") + name + ") is a cross-attention / mixture-of-experts module, not supported"
                 : std::string(" is not a TensorRT-LLM LoRA module id (0..7 here)")));
    }
    const LoraModule module = static_cast<LoraModule>(id);
    if (rank < 1) fail(row + "adapter_size " + s(rank) + " must be >= 1");
    if (rank > max_rank)
      fail(row + "layer " + s(layer) + " " + lora_module_name(module) + ": rank " + s(rank) +
           " is above lora_cache_max_adapter_size " + s(max_rank));
    if (layer < 0 || layer >= config.num_layers)
      fail(row + "layer " + s(layer) + (layer < 0 ? " < 0" : " >= num_hidden_layers " + s(config.num_layers)));
    if (auto [it, fresh] = row_of.emplace(std::make_pair(layer, id), i); !fresh)
      fail(row + "layer " + s(layer) + " " + lora_module_name(module) + " was already given by row " +
           s(it->second));
    LoraModuleDims dims;
    try {
      dims = lora_module_dims(config, module);
    } catch (const EngineError& e) {
      fail(row + "module_id " + s(id) + " (" + lora_module_name(module) + "): " + e.what());
    }
    const int64_t need = static_cast<int64_t>(rank) * (dims.in + dims.out);
    if (need > cols)
      fail("lora_weights row " + s(i) + " has " + s(cols) + " values but " + lora_module_name(module) +
           " of rank " + s(rank) + " needs " + s(rank) + " x (" + s(dims.in) + " + " + s(dims.out) +
           ") = " + s(need));

    const float* src = weights + i * cols;
    LoraWeight w;
    w.layer = layer;
    w.module = module;
    w.rank = rank;
    w.in = dims.in;
    w.out = dims.out;
    w.a.assign(src, src + rank * dims.in);                                // [rank, in]
    w.b.assign(src + rank * dims.in, src + need);                         // [out, rank]; the rest of the row: padding
    adapter.weights.push_back(std::move(w));
  }
  check_lora_adapter(adapter, config, max_rank, "lora_weights");
  return adapter;
}

}  // namespace engine
