#include "lora/lora-adapter.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "errors.h"

namespace engine {

namespace {

std::string s(int64_t v) { return std::to_string(v); }

// Only the Llama family runs act(gate) * up (llama_spec); GPT-2's MLP is act(up), so it has no mlp_gate.
bool gated_mlp(const ModelConfig& c) { return c.architecture == Architecture::llama; }

int64_t q_dim(const ModelConfig& c) { return static_cast<int64_t>(c.num_heads) * c.head_dim; }
int64_t kv_dim(const ModelConfig& c) { return static_cast<int64_t>(c.num_kv_heads) * c.head_dim; }

// Where a width comes from, for messages: "(num_key_value_heads 2 x head_dim 16)".
std::string q_why(const ModelConfig& c) {
  return "(num_attention_heads " + s(c.num_heads) + " x head_dim " + s(c.head_dim) + ")";
}
std::string kv_why(const ModelConfig& c) {
  return "(num_key_value_heads " + s(c.num_kv_heads) + " x head_dim " + s(c.head_dim) + ")";
}
std::string width_why(const ModelConfig& c, LoraModule m, bool input) {
  const std::string hidden = "(hidden_size " + s(c.hidden_size) + ")";
  const std::string inter = "(intermediate_size " + s(c.intermediate_size) + ")";
  switch (m) {
    case LoraModule::attn_qkv:
      return input ? hidden : "(q " + s(q_dim(c)) + " " + q_why(c) + " + k and v " + s(kv_dim(c)) + " each " +
                                  kv_why(c) + ")";
    case LoraModule::attn_q: return input ? hidden : q_why(c);
    case LoraModule::attn_k:
    case LoraModule::attn_v: return input ? hidden : kv_why(c);
    case LoraModule::attn_dense: return input ? q_why(c) : hidden;
    case LoraModule::mlp_h_to_4h:
    case LoraModule::mlp_gate: return input ? hidden : inter;
    case LoraModule::mlp_4h_to_h: return input ? inter : hidden;
  }
  return "";
}

bool is_mlp(LoraModule m) {
  return m == LoraModule::mlp_h_to_4h || m == LoraModule::mlp_4h_to_h || m == LoraModule::mlp_gate;
}

}  // namespace

const char* lora_module_name(LoraModule m) {
  switch (m) {
    case LoraModule::attn_qkv: return "attn_qkv";
    case LoraModule::attn_q: return "attn_q";
    case LoraModule::attn_k: return "attn_k";
    case LoraModule::attn_v: return "attn_v";
    case LoraModule::attn_dense: return "attn_dense";
    case LoraModule::mlp_h_to_4h: return "mlp_h_to_4h";
    case LoraModule::mlp_4h_to_h: return "mlp_4h_to_h";
    case LoraModule::mlp_gate: return "mlp_gate";
  }
  return "unknown";
}

const char* lora_module_hf_name(LoraModule m) {
  switch (m) {
    case LoraModule::attn_qkv: return "qkv_proj";
    case LoraModule::attn_q: return "q_proj";
    case LoraModule::attn_k: return "k_proj";
    case LoraModule::attn_v: return "v_proj";
    case LoraModule::attn_dense: return "o_proj";
    case LoraModule::mlp_h_to_4h: return "gate_proj";
    case LoraModule::mlp_4h_to_h: return "down_proj";
    case LoraModule::mlp_gate: return "up_proj";
  }
  return "unknown";
}

bool is_lora_module_id(int32_t id) { return id >= 0 && id < kLoraModuleCount; }

size_t LoraAdapter::bytes() const {
  size_t n = 0;
  for (const LoraWeight& w : weights) n += (w.a.size() + w.b.size()) * sizeof(float);
  return n;
}

int32_t LoraAdapter::max_rank() const {
  int32_t r = 0;
  for (const LoraWeight& w : weights) r = std::max(r, w.rank);
  return r;
}

LoraModuleDims lora_module_dims(const ModelConfig& c, LoraModule m) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  switch (m) {
    case LoraModule::attn_qkv: return {hidden, q_dim(c) + 2 * kv_dim(c)};
    case LoraModule::attn_q: return {hidden, q_dim(c)};
    case LoraModule::attn_k:
    case LoraModule::attn_v: return {hidden, kv_dim(c)};
    case LoraModule::attn_dense: return {q_dim(c), hidden};
    case LoraModule::mlp_h_to_4h: return {hidden, inter};
    case LoraModule::mlp_4h_to_h: return {inter, hidden};
    case LoraModule::mlp_gate:
      if (!gated_mlp(c))
        throw EngineError(ErrorCode::invalid_argument,
                          std::string("mlp_gate (up_proj) is the multiplier of a gated MLP; ") +
                              c.architecture_name + "'s MLP is not gated (its up projection is mlp_h_to_4h)");
      return {hidden, inter};
  }
  throw EngineError(ErrorCode::invalid_argument,
                    "module_id " + s(static_cast<int32_t>(m)) + " is not a LoRA module of a decoder-only model");
}

void check_lora_adapter(const LoraAdapter& adapter, const ModelConfig& c, int32_t max_rank,
                        const std::string& source) {
  std::set<std::pair<int32_t, int32_t>> seen;  // (layer, module id)
  for (const LoraWeight& w : adapter.weights) {
    const int32_t id = static_cast<int32_t>(w.module);
    if (!is_lora_module_id(id))
      throw EngineError(ErrorCode::invalid_argument,
                        source + ": layer " + s(w.layer) + ": module_id " + s(id) + " is not a LoRA module id (0..7)");
    const std::string where = source + ": layer " + s(w.layer) + " " + lora_module_name(w.module) + ": ";
    auto fail = [&](const std::string& what) { throw EngineError(ErrorCode::invalid_argument, where + what); };

    if (w.layer < 0 || w.layer >= c.num_layers)
      fail("layer " + s(w.layer) + (w.layer < 0 ? " < 0" : " >= num_hidden_layers " + s(c.num_layers)));
    if (is_mlp(w.module) && c.moe.sparse_layer(w.layer))
      fail("layer " + s(w.layer) + " is a mixture-of-experts layer (" + s(c.moe.num_experts) +
           " experts): it has no dense MLP, and its experts take no LoRA");
    LoraModuleDims dims;
    try {
      dims = lora_module_dims(c, w.module);
    } catch (const EngineError& e) {
      fail(e.what());
    }
    if (!seen.insert({w.layer, id}).second) fail("given twice");
    if (w.rank < 1) fail("rank " + s(w.rank) + " must be >= 1");
    if (w.rank > max_rank)
      fail("rank " + s(w.rank) + " is above lora_cache_max_adapter_size " + s(max_rank));
    const char* hf = lora_module_hf_name(w.module);
    if (w.out != dims.out)
      fail("lora_B is [" + s(w.out) + ", " + s(w.rank) + "] but " + hf + " of this model has " + s(dims.out) +
           " output rows " + width_why(c, w.module, false));
    if (w.in != dims.in)
      fail("lora_A is [" + s(w.rank) + ", " + s(w.in) + "] but " + hf + " of this model has " + s(dims.in) +
           " input columns " + width_why(c, w.module, true));
    if (static_cast<int64_t>(w.a.size()) != w.rank * w.in)
      fail("A holds " + s(static_cast<int64_t>(w.a.size())) + " values, rank " + s(w.rank) + " x in " + s(w.in) +
           " needs " + s(w.rank * w.in));
    if (static_cast<int64_t>(w.b.size()) != w.out * w.rank)
      fail("B holds " + s(static_cast<int64_t>(w.b.size())) + " values, out " + s(w.out) + " x rank " +
           s(w.rank) + " needs " + s(w.out * w.rank));
    // Refused here rather than surfacing as NaN logits in the middle of some request's generation.
    for (size_t i = 0; i < w.a.size(); ++i)
      if (!std::isfinite(w.a[i])) fail("A[" + s(static_cast<int64_t>(i)) + "] is " + std::to_string(w.a[i]));
    for (size_t i = 0; i < w.b.size(); ++i)
      if (!std::isfinite(w.b[i])) fail("B[" + s(static_cast<int64_t>(i)) + "] is " + std::to_string(w.b[i]));
  }
}

}  // namespace engine
