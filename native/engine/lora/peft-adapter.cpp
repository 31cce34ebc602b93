#include "lora/peft-adapter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "errors.h"
#include "loading/json.h"
#include "loading/safetensors.h"

namespace engine {

namespace {

std::string s(int64_t v) { return std::to_string(v); }
std::string num(double v) {
  std::string t = std::to_string(v);  // "8.000000": trim to "8" / "0.5" so messages read like the config
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string t = "[";
  for (size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + s(shape[i]);
  return t + "]";
}

[[noreturn]] void fail(ErrorCode code, const std::string& message) { throw EngineError(code, message); }

// ---- adapter_config.json ----

struct PeftConfig {
  std::string path;
  int64_t r = 8;        // PEFT's defaults
  double alpha = 8;
  bool rslora = false;  // scale alpha / sqrt(r) instead of alpha / r
  std::vector<std::pair<std::string, int64_t>> rank_pattern;  // file order: the first match wins, as in PEFT
  std::vector<std::pair<std::string, double>> alpha_pattern;
  std::string target_modules;  // as written, for messages
};

bool given(const json::Value* v) { return v != nullptr && !v->is_null(); }

std::string json_text(const json::Value& v) {
  if (v.is_string()) return "'" + v.as_string() + "'";
  if (v.is_array()) {
    std::string t = "[";
    for (const json::Value& x : v.as_array()) t += (t.size() > 1 ? ", " : "") + json_text(x);
    return t + "]";
  }
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_number()) return num(v.as_number());
  return json::Value::type_name(v.type());
}

PeftConfig read_config(const std::string& path) {
  const json::Value doc = json::parse_file(path);
  if (!doc.is_object()) fail(ErrorCode::bad_checkpoint, path + " must hold a JSON object");
  PeftConfig c;
  c.path = path;
  auto field = [&](const char* key) { return path + " " + key; };
  if (const json::Value* v = doc.find("peft_type"); given(v) && v->as_string(field("peft_type")) != "LORA")
    fail(ErrorCode::unsupported, path + ": peft_type '" + v->as_string() + "' is not supported (only LORA)");
  if (const json::Value* v = doc.find("r"); given(v)) c.r = v->as_int64(field("r"));
  if (c.r < 1) fail(ErrorCode::bad_checkpoint, path + ": r must be >= 1, got " + s(c.r));
  if (const json::Value* v = doc.find("lora_alpha"); given(v)) c.alpha = v->as_number(field("lora_alpha"));
  if (const json::Value* v = doc.find("use_rslora"); given(v)) c.rslora = v->as_bool(field("use_rslora"));
  // Each refusal below is a feature whose forward pass is more than y += scale * B A x on q/k/v/o/MLP weights.
  if (const json::Value* v = doc.find("use_dora"); given(v) && v->as_bool(field("use_dora")))
    fail(ErrorCode::unsupported, path + ": use_dora is not supported (DoRA's magnitude vector rescales the merged weight's rows)");
  if (const json::Value* v = doc.find("bias"); given(v) && v->as_string(field("bias")) != "none")
    fail(ErrorCode::unsupported, path + ": bias '" + v->as_string() + "' is not supported (only 'none')");
  if (const json::Value* v = doc.find("lora_bias"); given(v) && v->as_bool(field("lora_bias")))
    fail(ErrorCode::unsupported, path + ": lora_bias true is not supported (lora_B without a bias only)");
  if (const json::Value* v = doc.find("modules_to_save"); given(v) && !(v->is_array() && v->as_array().empty()))
    fail(ErrorCode::unsupported, path + ": modules_to_save " + json_text(*v) +
                                     " is not supported: those modules are whole trained copies, not LoRA weights");
  if (const json::Value* v = doc.find("rank_pattern"); given(v))
    for (const auto& [key, value] : v->as_object(field("rank_pattern")))
      c.rank_pattern.emplace_back(key, value.as_int64(field("rank_pattern") + "['" + key + "']"));
  if (const json::Value* v = doc.find("alpha_pattern"); given(v))
    for (const auto& [key, value] : v->as_object(field("alpha_pattern")))
      c.alpha_pattern.emplace_back(key, value.as_number(field("alpha_pattern") + "['" + key + "']"));
  if (const json::Value* v = doc.find("target_modules"); given(v)) c.target_modules = json_text(*v);
  // fan_in_fan_out is not read: it transposes only PEFT's merged delta (for Conv1D bases such as GPT-2's);
  // lora_A / lora_B are nn.Linear weights, [r, in] and [out, r], either way — the shape checks below hold.
  return c;
}

// PEFT's get_pattern_key: a key equal to the module name, else the first key K (in file order) for which the name
// matches (.*\.)?(K)$ — a plain key such as "v_proj" matches any module path ending in ".v_proj", and newer PEFT's
// regex keys ("layers\.1\..*down_proj") work through the same expression.
template <typename T>
const std::pair<std::string, T>* find_pattern(const std::vector<std::pair<std::string, T>>& patterns,
                                              const std::string& module, const std::string& path,
                                              const char* field) {
  for (const auto& p : patterns)
    if (p.first == module) return &p;
  for (const auto& p : patterns) {
    try {
      if (std::regex_match(module, std::regex("(.*\\.)?(" + p.first + ")"))) return &p;
    } catch (const std::regex_error& e) {
      fail(ErrorCode::bad_checkpoint,
           path + ": " + field + " key '" + p.first + "' is neither a module name nor a regex: " + e.what());
    }
  }
  return nullptr;
}

// ---- adapter_model.safetensors tensor names ----

std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t dot; (dot = name.find('.', begin)) != std::string::npos; begin = dot + 1)
    parts.push_back(name.substr(begin, dot - begin));
  parts.push_back(name.substr(begin));
  return parts;
}
std::string join(const std::vector<std::string>& parts, size_t begin, size_t end) {
  std::string t;
  for (size_t i = begin; i < end; ++i) t += (i > begin ? "." : "") + parts[i];
  return t;
}
bool digits(const std::string& t) {
  return !t.empty() && t.size() <= 9 && std::all_of(t.begin(), t.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

// What a tensor name says: base_model.model.<module>.lora_(A|B)[.<adapter>].weight.
struct TensorName {
  std::string module;   // the module's path in the base model ("model.layers.3.self_attn.q_proj"): patterns match it
  bool is_a = true;     // lora_A, else lora_B
  std::string adapter;  // "" when the name carries none
  int32_t layer = 0;
  std::string kind;     // "self_attn.q_proj", "mlp.c_fc", ...: the part after the layer index
};

TensorName parse_name(const std::string& tensor, const std::string& file) {
  auto refuse = [&](const std::string& why) { fail(ErrorCode::unsupported, file + ": tensor '" + tensor + "': " + why); };
  if (tensor.find("lora_embedding_") != std::string::npos)
    refuse("LoRA on embeddings (lora_embedding_A / lora_embedding_B) is not supported");
  if (tensor.find("lora_magnitude_vector") != std::string::npos) refuse("use_dora is not supported");
  const std::vector<std::string> parts = split(tensor);
  size_t k = parts.size();
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i] == "lora_A" || parts[i] == "lora_B") k = i;
  if (k == parts.size()) refuse("not a LoRA weight (lora_A / lora_B); only LoRA adapters are read");
  const size_t tail = parts.size() - k;  // lora_X.weight or lora_X.<adapter>.weight
  if (parts.back() != "weight" || (tail != 2 && tail != 3))
    refuse("not a LoRA weight ('" + join(parts, k, parts.size()) + "': lora_B biases are not supported)");
  TensorName t;
  t.is_a = parts[k] == "lora_A";
  if (tail == 3) t.adapter = parts[k + 1];
  size_t begin = 0;
  if (parts.size() > 2 && parts[0] == "base_model" && parts[1] == "model") begin = 2;
  t.module = join(parts, begin, k);
  size_t layer_at = k;
  for (size_t i = begin; i + 1 < k; ++i)
    if ((parts[i] == "layers" || parts[i] == "h") && digits(parts[i + 1])) {
      layer_at = i + 1;
      break;
    }
  if (layer_at == k)
    refuse("'" + t.module + "' is not in a decoder layer; only the layers' attention and MLP projections take LoRA");
  t.layer = static_cast<int32_t>(std::stol(parts[layer_at]));
  for (size_t i = layer_at + 1; i < k; ++i)
    if (parts[i] == "experts" || parts[i] == "shared_expert" || parts[i] == "block_sparse_moe")
      refuse("LoRA on mixture-of-experts modules ('" + t.module + "') is not supported");
  t.kind = join(parts, layer_at + 1, k);
  return t;
}

// The engine modules a PEFT module feeds: one, or two for Phi-3's gate_up_proj (B's rows split in half).
std::vector<LoraModule> modules_of(const TensorName& t, const ModelConfig& config, const std::string& tensor,
                                   const std::string& file) {
  static const std::map<std::string, std::vector<LoraModule>> llama = {
      {"self_attn.q_proj", {LoraModule::attn_q}},        {"self_attn.k_proj", {LoraModule::attn_k}},
      {"self_attn.v_proj", {LoraModule::attn_v}},        {"self_attn.o_proj", {LoraModule::attn_dense}},
      {"self_attn.qkv_proj", {LoraModule::attn_qkv}},    {"mlp.gate_proj", {LoraModule::mlp_h_to_4h}},
      {"mlp.up_proj", {LoraModule::mlp_gate}},           {"mlp.down_proj", {LoraModule::mlp_4h_to_h}},
      {"mlp.gate_up_proj", {LoraModule::mlp_h_to_4h, LoraModule::mlp_gate}}};
  static const std::map<std::string, std::vector<LoraModule>> gpt2 = {
      {"attn.c_attn", {LoraModule::attn_qkv}},  {"attn.c_proj", {LoraModule::attn_dense}},
      {"mlp.c_fc", {LoraModule::mlp_h_to_4h}},  {"mlp.c_proj", {LoraModule::mlp_4h_to_h}}};
  const bool is_gpt2 = config.architecture == Architecture::gpt2;
  const auto& names = is_gpt2 ? gpt2 : llama;
  if (auto it = names.find(t.kind); it != names.end()) return it->second;
  std::string known;
  for (const auto& [kind, modules] : names) known += (known.empty() ? "" : ", ") + kind;
  fail(ErrorCode::unsupported, file + ": tensor '" + tensor + "': module '" + t.kind + "' has no LoRA module on " +
                                   config.architecture_name + " (supported: " + known + ")");
}

struct Pair {
  TensorName name;
  const TensorInfo* a = nullptr;
  const TensorInfo* b = nullptr;
};

}  // namespace

LoraAdapter load_peft_adapter(const std::string& dir, const ModelConfig& config, int32_t max_rank) {
  namespace fs = std::filesystem;
  const std::string config_path = dir + "/adapter_config.json";
  const std::string weights_path = dir + "/adapter_model.safetensors";
  if (!fs::exists(config_path)) fail(ErrorCode::not_found, "LoRA adapter: " + config_path + " does not exist");
  if (!fs::exists(weights_path)) {
    if (fs::exists(dir + "/adapter_model.bin"))
      fail(ErrorCode::unsupported, "LoRA adapter: " + dir +
                                       " has only adapter_model.bin, a pickle, and pickles are not read; save the "
                                       "adapter with safe_serialization=True (PEFT's default) to get " +
                                       weights_path);
    fail(ErrorCode::not_found, "LoRA adapter: " + weights_path + " does not exist");
  }
  const PeftConfig pc = read_config(config_path);
  const SafetensorsFile file(weights_path);

  std::map<std::string, Pair> pairs;  // by module path
  std::set<std::string> adapter_names;
  for (const TensorInfo& t : file.tensors()) {
    const TensorName name = parse_name(t.name, weights_path);
    modules_of(name, config, t.name, weights_path);  // refuses modules the engine has no LoRA for, by tensor name
    adapter_names.insert(name.adapter);
    Pair& p = pairs[name.module];
    p.name = name;
    (name.is_a ? p.a : p.b) = &t;
  }
  if (adapter_names.size() > 1) {
    std::string list;
    for (const std::string& n : adapter_names) list += (list.empty() ? "'" : ", '") + n + "'";
    fail(ErrorCode::unsupported, weights_path + " holds the weights of several adapter names (" + list +
                                     "); one adapter per directory is read");
  }
  if (pairs.empty())
    fail(ErrorCode::bad_checkpoint, weights_path + " holds no LoRA weights (target_modules " +
                                        (pc.target_modules.empty() ? "unset" : pc.target_modules) + ")");

  LoraAdapter adapter;
  for (const auto& [module, p] : pairs) {
    const char* missing = p.a == nullptr ? "lora_A" : p.b == nullptr ? "lora_B" : nullptr;
    if (missing)
      fail(ErrorCode::bad_checkpoint, weights_path + ": " + module + " has " + (p.a ? "lora_A" : "lora_B") +
                                          " but no " + missing + " tensor (" + module + "." + missing +
                                          (p.name.adapter.empty() ? "" : "." + p.name.adapter) + ".weight)");
    const TensorInfo& ta = *p.a;
    const TensorInfo& tb = *p.b;
    if (ta.shape.size() != 2 || tb.shape.size() != 2 || ta.shape[0] != tb.shape[1])
      fail(ErrorCode::bad_checkpoint, weights_path + ": " + module + ": lora_A is " + shape_text(ta.shape) +
                                          " and lora_B is " + shape_text(tb.shape) +
                                          "; they must be [r, in] and [out, r] of one r");
    const int64_t rank = ta.shape[0], in = ta.shape[1], out = tb.shape[0];

    const auto* rp = find_pattern(pc.rank_pattern, module, config_path, "rank_pattern");
    const auto* ap = find_pattern(pc.alpha_pattern, module, config_path, "alpha_pattern");
    const int64_t r = rp ? rp->second : pc.r;
    const double alpha = ap ? ap->second : pc.alpha;
    if (rank != r)
      fail(ErrorCode::bad_checkpoint, weights_path + ": " + module + ": lora_A is " + shape_text(ta.shape) +
                                          " (rank " + s(rank) + ") but " + config_path + " gives it r " + s(r) +
                                          (rp ? " (rank_pattern '" + rp->first + "')" : ""));
    const std::vector<LoraModule> modules = modules_of(p.name, config, ta.name, weights_path);
    // Checked before converting, so a refused adapter converts nothing (check_lora_adapter says the same later).
    if (rank > max_rank)
      fail(ErrorCode::invalid_argument, dir + ": layer " + s(p.name.layer) + " " + lora_module_name(modules[0]) +
                                            ": rank " + s(rank) + " is above lora_cache_max_adapter_size " +
                                            s(max_rank));
    const double scale = pc.rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);

    const std::vector<float> a = tensor_as_f32(ta, weights_path, "LoRA weights");  // [rank, in]
    std::vector<float> b = tensor_as_f32(tb, weights_path, "LoRA weights");        // [out, rank]
    for (float& v : b) v = static_cast<float>(static_cast<double>(v) * scale);

    if (modules.size() == 2 && out % 2 != 0)
      fail(ErrorCode::bad_checkpoint, weights_path + ": " + module + ": lora_B is " + shape_text(tb.shape) +
                                          "; gate_up_proj needs an even row count (gate rows, then up rows)");
    const int64_t part = out / static_cast<int64_t>(modules.size());  // rows per module
    for (size_t m = 0; m < modules.size(); ++m) {
      LoraWeight w;
      w.layer = p.name.layer;
      w.module = modules[m];
      w.rank = static_cast<int32_t>(rank);
      w.in = in;
      w.out = part;
      w.a = a;
      w.b.assign(b.begin() + static_cast<ptrdiff_t>(m * part * rank),
                 b.begin() + static_cast<ptrdiff_t>((m + 1) * part * rank));
      adapter.weights.push_back(std::move(w));
    }
  }
  std::sort(adapter.weights.begin(), adapter.weights.end(), [](const LoraWeight& x, const LoraWeight& y) {
    return x.layer != y.layer ? x.layer < y.layer : x.module < y.module;
  });
  check_lora_adapter(adapter, config, max_rank, dir);
  return adapter;
}

}  // namespace engine
