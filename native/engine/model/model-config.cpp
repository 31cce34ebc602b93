#include "model/model-config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "errors.h"
#include "loading/json.h"

namespace engine {

namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A number as a config file would write it (%g: 0.75, -1, 1e+06).
std::string shown(double x) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", x);
  return out;
}

// Reads fields of one config file with messages that name the file and the field.
struct Fields {
  const json::Value& doc;
  std::string file;

  const json::Value* get(const char* key) const {
    const json::Value* v = doc.find(key);
    return (v && !v->is_null()) ? v : nullptr;
  }
  std::string what(const char* key) const { return file + ": field '" + key + "'"; }

  int32_t required_int(const char* key) const {
    const json::Value* v = get(key);
    if (!v) throw EngineError(ErrorCode::bad_checkpoint, file + " lacks required field '" + key + "'");
    return positive(key, v->as_int64(what(key)));
  }
  int32_t optional_int(const char* key, int32_t fallback) const {
    const json::Value* v = get(key);
    return v ? positive(key, v->as_int64(what(key))) : fallback;
  }
  int32_t positive(const char* key, int64_t value) const {
    if (value <= 0 || value > (int64_t{1} << 30))
      throw EngineError(ErrorCode::bad_checkpoint, what(key) + " must be a positive integer, got " +
                                                       std::to_string(value));
    return static_cast<int32_t>(value);
  }
  float optional_float(const char* key, float fallback) const {
    const json::Value* v = get(key);
    return v ? static_cast<float>(v->as_number(what(key))) : fallback;
  }
  bool optional_bool(const char* key, bool fallback) const {
    const json::Value* v = get(key);
    return v ? v->as_bool(what(key)) : fallback;
  }
  std::string optional_string(const char* key, const std::string& fallback) const {
    const json::Value* v = get(key);
    return v ? v->as_string(what(key)) : fallback;
  }
  // bos/eos/pad ids: an int, or (eos) a list of ints.
  std::vector<int32_t> token_ids(const char* key) const {
    std::vector<int32_t> ids;
    const json::Value* v = get(key);
    if (!v) return ids;
    if (v->is_array()) {
      for (const auto& e : v->as_array(what(key))) ids.push_back(static_cast<int32_t>(e.as_int64(what(key))));
    } else {
      ids.push_back(static_cast<int32_t>(v->as_int64(what(key))));
    }
    return ids;
  }
};

// The architectures we load, with the model_type old configs carry instead of `architectures`: one row per family,
// from which the lookups and the "supported:" list are made.
struct Family {
  const char* model_type;
  const char* architecture;
  Architecture kind;
};
constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM", Architecture::llama},   {"mistral", "MistralForCausalLM", Architecture::llama},
    {"qwen2", "Qwen2ForCausalLM", Architecture::llama},   {"qwen3", "Qwen3ForCausalLM", Architecture::llama},
    {"phi3", "Phi3ForCausalLM", Architecture::llama},     {"gemma", "GemmaForCausalLM", Architecture::llama},
    {"qwen2_moe", "Qwen2MoeForCausalLM", Architecture::llama}, {"qwen3_moe", "Qwen3MoeForCausalLM", Architecture::llama},
    {"mixtral", "MixtralForCausalLM", Architecture::llama},    {"gemma2", "Gemma2ForCausalLM", Architecture::llama},
    {"gpt2", "GPT2LMHeadModel", Architecture::gpt2},
};

const Family* family_named(const std::string& architecture) {
  for (const Family& fam : kFamilies)
    if (architecture == fam.architecture) return &fam;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const Family& fam : kFamilies) out += (out.empty() ? "" : ", ") + std::string(fam.architecture);
  return out;
}

void read_longrope(const Fields& f, const json::Value& rs, const char* key, ModelConfig& c);

// `key` is "rope_scaling" (transformers 4.x, with rope_theta beside it) or "rope_parameters" (transformers 5.x,
// which moves rope_theta inside and writes {"rope_type": "default"} when nothing is scaled).
void read_rope_scaling(const Fields& f, ModelConfig& c, const char* key) {
  const json::Value* rs = f.get(key);
  if (!rs) return;
  const std::string w = f.what(key);
  rs->as_object(w);
  if (const json::Value* theta = rs->find("rope_theta"); theta && !theta->is_null())
    c.rope_theta = static_cast<float>(theta->as_number(w + ".rope_theta"));
  const json::Value* type = rs->find("rope_type");
  if (!type || type->is_null()) type = rs->find("type");
  std::string t = (type && !type->is_null()) ? type->as_string(w + ".rope_type") : "default";
  if (t == "su") t = "longrope";  // the name early Phi-3 configs use
  if (t != "default" && t != "linear" && t != "llama3" && t != "longrope")
    throw EngineError(ErrorCode::unsupported, f.file + ": " + key + " type '" + t +
                                                  "' is not supported; supported: default, linear, llama3, longrope");
  c.rope_scaling.type = t;
  auto num = [&](const char* key, float fallback) {
    const json::Value* v = rs->find(key);
    return (v && !v->is_null()) ? static_cast<float>(v->as_number(w + "." + key)) : fallback;
  };
  if (t == "default") return;
  if (t == "longrope") {
    read_longrope(f, *rs, key, c);
    return;
  }
  const json::Value* factor = rs->find("factor");
  if (!factor || factor->is_null())
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": " + key + " of type '" + t + "' lacks 'factor'");
  c.rope_scaling.factor = num("factor", 1.0f);
  if (!(c.rope_scaling.factor > 0))
    throw EngineError(ErrorCode::bad_checkpoint, w + ".factor must be > 0");
  if (t == "llama3") {
    c.rope_scaling.low_freq_factor = num("low_freq_factor", c.rope_scaling.low_freq_factor);
    c.rope_scaling.high_freq_factor = num("high_freq_factor", c.rope_scaling.high_freq_factor);
    const json::Value* omp = rs->find("original_max_position_embeddings");
    if (omp && !omp->is_null())
      c.rope_scaling.original_max_position_embeddings =
          static_cast<int32_t>(omp->as_int64(w + ".original_max_position_embeddings"));
    if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
      throw EngineError(ErrorCode::bad_checkpoint, w + ": high_freq_factor must exceed low_freq_factor");
  }
}

// Phi-3's longrope: short_factor / long_factor lists of head_dim / 2 divisors; the threshold is
// original_max_position_embeddings (inside the rope parameters, or at the top level as Phi-3 writes it); the
// attention factor, when absent, is sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings / original,
// transformers' _compute_longrope_parameters.
void read_longrope(const Fields& f, const json::Value& rs, const char* key, ModelConfig& c) {
  const std::string w = f.file + ": " + key;
  RopeScaling& r = c.rope_scaling;
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  auto factors = [&](const char* key) {
    const json::Value* v = rs.find(key);
    if (!v || v->is_null())
      throw EngineError(ErrorCode::bad_checkpoint, w + " of type 'longrope' lacks '" + key + "'");
    std::vector<float> out;
    for (const json::Value& x : v->as_array(w + "." + key)) {
      out.push_back(static_cast<float>(x.as_number(w + "." + key)));
      if (!(out.back() > 0)) {
        throw EngineError(ErrorCode::bad_checkpoint, w + "." + key + " entries must be > 0, got " + shown(out.back()));
      }
    }
    if (out.size() != half)
      throw EngineError(ErrorCode::bad_checkpoint, w + "." + key + " has " + std::to_string(out.size()) +
                                                       " entries; head_dim / 2 = " + std::to_string(half));
    return out;
  };
  r.short_factor = factors("short_factor");
  r.long_factor = factors("long_factor");
  int64_t original = 0;
  if (const json::Value* v = rs.find("original_max_position_embeddings"); v && !v->is_null())
    original = v->as_int64(w + ".original_max_position_embeddings");
  else if (f.get("original_max_position_embeddings"))
    original = f.required_int("original_max_position_embeddings");
  else
    original = c.max_position_embeddings;
  if (original <= 0)
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": original_max_position_embeddings must be > 0, got " +
                                                     std::to_string(original));
  r.original_max_position_embeddings = static_cast<int32_t>(original);
  if (const json::Value* v = rs.find("attention_factor"); v && !v->is_null()) {
    r.attention_factor = static_cast<float>(v->as_number(w + ".attention_factor"));
  } else {
    const double s = static_cast<double>(c.max_position_embeddings) / static_cast<double>(original);
    r.attention_factor = s <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(s) / std::log(double(original))));
  }
}

// Rotary embeddings over only part of each head (Phi-4-mini, some GPT-NeoX-style configs) are not implemented. The
// factor sits at the top level (transformers 4.x) or inside rope_parameters / rope_scaling (5.x).
void refuse_partial_rotary(const Fields& f) {
  auto check = [&](const json::Value* v, const std::string& name) {
    if (!v || v->is_null()) return;
    const double x = v->as_number(f.file + ": " + name);
    if (x == 1.0) return;
    throw EngineError(ErrorCode::unsupported, f.file + ": " + name + " " + shown(x) +
                                                  " is not supported (rotary embeddings over the whole head only)");
  };
  check(f.get("partial_rotary_factor"), "partial_rotary_factor");
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (const json::Value* obj = f.get(key); obj && obj->is_object())
      check(obj->find("partial_rotary_factor"), std::string(key) + ".partial_rotary_factor");
}

// Sliding windows (model-config.h's layer_window). The window's size is `sliding_window` (the Qwen families: only
// with use_sliding_window true, as transformers reads them); which layers take it, `layer_types` when the config
// lists them, else each family's rule. A window at least as long as the model's positions changes nothing but is
// kept: max_seq_len may exceed max_position_embeddings for rope models.
void read_sliding_window(const Fields& f, ModelConfig& c) {
  const std::string& a = c.architecture_name;
  const bool qwen = a.rfind("Qwen", 0) == 0, gemma2 = a == "Gemma2ForCausalLM";
  // Llama and Gemma have no sliding window, whatever a config says (transformers ignores the field there too).
  if (!qwen && !gemma2 && a != "MistralForCausalLM" && a != "MixtralForCausalLM" && a != "Phi3ForCausalLM") return;
  int32_t window = 0;
  if (const json::Value* w = f.get("sliding_window"); w && (!qwen || f.optional_bool("use_sliding_window", false))) {
    const int64_t v = w->as_int64(f.what("sliding_window"));
    if (v <= 0 || v > (int64_t{1} << 30))
      throw EngineError(ErrorCode::bad_checkpoint,
                        f.file + ": sliding_window must be a positive integer or null, got " + std::to_string(v));
    window = static_cast<int32_t>(v);
  }
  std::vector<bool> sliding(static_cast<size_t>(c.num_layers), false);
  if (const json::Value* lt = f.get("layer_types")) {
    const auto& types = lt->as_array(f.what("layer_types"));
    if (types.size() != sliding.size())
      throw EngineError(ErrorCode::bad_checkpoint, f.what("layer_types") + " has " + std::to_string(types.size()) +
                                                       " entries for " + std::to_string(c.num_layers) +
                                                       " layers (num_hidden_layers)");
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].as_string(f.what("layer_types"));
      if (t != "full_attention" && t != "sliding_attention")
        throw EngineError(ErrorCode::unsupported, f.file + ": layer_types entry \"" + t +
                                                      "\" is not supported; supported: full_attention, sliding_attention");
      sliding[i] = t == "sliding_attention";
    }
  } else {
    const int32_t from = qwen ? f.optional_int("max_window_layers", c.num_layers) : 0;
    for (int32_t i = 0; i < c.num_layers; ++i)
      sliding[static_cast<size_t>(i)] = gemma2 ? i % 2 == 0 : i >= from;
  }
  if (gemma2 && window == 0 && std::find(sliding.begin(), sliding.end(), true) != sliding.end())
    throw EngineError(ErrorCode::bad_checkpoint, f.file + " lacks 'sliding_window' (Gemma 2's local layers need it)");
  c.sliding_window = window;
  c.layer_window.assign(sliding.size(), 0);
  for (size_t i = 0; i < sliding.size(); ++i) c.layer_window[i] = sliding[i] ? window : 0;
}

// Gemma 2 (read after Gemma's fields): scores scaled by query_pre_attn_scalar^-0.5, soft-capped scores and logits,
// four norms a layer.
void read_gemma2(const Fields& f, ModelConfig& c) {
  c.query_scale = 1.0f / std::sqrt(f.optional_float("query_pre_attn_scalar", static_cast<float>(c.head_dim)));
  if (!(c.query_scale > 0) || !std::isfinite(c.query_scale))
    throw EngineError(ErrorCode::bad_checkpoint, f.what("query_pre_attn_scalar") + " must be > 0");
  c.attn_softcap = f.optional_float("attn_logit_softcapping", 0.0f);
  c.final_softcap = f.optional_float("final_logit_softcapping", 0.0f);
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (f.get(key) && !(f.optional_float(key, 0.0f) > 0))
      throw EngineError(ErrorCode::bad_checkpoint, f.what(key) + " must be > 0 or null, got " +
                                                       shown(f.optional_float(key, 0.0f)));
  c.sandwich_norms = true;
}

// The Qwen MoE families' and Mixtral's expert MLPs (model-config.h's MoeConfig); nothing for dense families.
void read_moe(const Fields& f, ModelConfig& c) {
  const std::string& a = c.architecture_name;
  const bool mixtral = a == "MixtralForCausalLM";
  if (!mixtral && a != "Qwen2MoeForCausalLM" && a != "Qwen3MoeForCausalLM") return;
  MoeConfig& m = c.moe;
  m.names = mixtral ? MoeConfig::Names::mixtral : MoeConfig::Names::qwen;
  // Each family's own key, or the other one (transformers 5 writes Qwen3-MoE's num_experts as num_local_experts).
  const char* key = mixtral ? "num_local_experts" : "num_experts";
  if (!f.get(key)) key = mixtral ? "num_experts" : "num_local_experts";
  if (!f.get(key)) key = mixtral ? "num_local_experts" : "num_experts";  // (named in the error)
  m.num_experts = f.required_int(key);
  m.top_k = f.required_int("num_experts_per_tok");
  if (m.top_k > m.num_experts)
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": num_experts_per_tok (" + std::to_string(m.top_k) +
                                                     ") exceeds the number of experts (" +
                                                     std::to_string(m.num_experts) + ")");
  m.expert_inter = mixtral ? c.intermediate_size : f.required_int("moe_intermediate_size");
  // Mixtral takes the softmax over the chosen experts' logits: the full softmax renormalised over them.
  m.norm_topk_prob = mixtral || f.optional_bool("norm_topk_prob", false);
  if (a == "Qwen2MoeForCausalLM") m.shared_inter = f.required_int("shared_expert_intermediate_size");
  m.sparse.assign(static_cast<size_t>(c.num_layers), true);
  if (mixtral) return;
  const int32_t step = f.optional_int("decoder_sparse_step", 1);
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  if (const json::Value* only = f.get("mlp_only_layers"))
    for (const json::Value& v : only->as_array(f.what("mlp_only_layers"))) {
      const int64_t i = v.as_int64(f.what("mlp_only_layers"));
      if (i < 0 || i >= c.num_layers)
        throw EngineError(ErrorCode::bad_checkpoint, f.what("mlp_only_layers") + " names layer " + std::to_string(i) +
                                                         " of a model with " + std::to_string(c.num_layers) +
                                                         " (num_hidden_layers)");
      dense[static_cast<size_t>(i)] = true;
    }
  for (int32_t i = 0; i < c.num_layers; ++i)
    m.sparse[static_cast<size_t>(i)] = !dense[static_cast<size_t>(i)] && (i + 1) % step == 0;
}

void read_llama(const Fields& f, ModelConfig& c) {
  c.architecture = Architecture::llama;
  c.vocab_size = f.required_int("vocab_size");
  c.hidden_size = f.required_int("hidden_size");
  c.num_layers = f.required_int("num_hidden_layers");
  c.num_heads = f.required_int("num_attention_heads");
  c.num_kv_heads = f.optional_int("num_key_value_heads", c.num_heads);
  c.head_dim = f.optional_int("head_dim", c.hidden_size / c.num_heads);
  c.intermediate_size = f.required_int("intermediate_size");
  c.max_position_embeddings = f.optional_int("max_position_embeddings", 2048);
  c.norm_eps = f.optional_float("rms_norm_eps", 1e-6f);
  c.rope_theta = f.optional_float("rope_theta", 10000.0f);
  c.hidden_act = f.optional_string("hidden_act", "silu");
  c.tie_word_embeddings = f.optional_bool("tie_word_embeddings", false);
  if (c.architecture_name == "GemmaForCausalLM" || c.architecture_name == "Gemma2ForCausalLM") {
    // transformers' Gemma runs `hidden_activation` (the tanh GELU when absent), whatever `hidden_act` says.
    c.hidden_act = f.optional_string("hidden_activation", "gelu_pytorch_tanh");
    c.tie_word_embeddings = f.optional_bool("tie_word_embeddings", true);
    c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
    c.norm_plus_one = true;
  }
  if (c.architecture_name == "Qwen2ForCausalLM" || c.architecture_name == "Qwen2MoeForCausalLM") {
    // Qwen2 always has q/k/v biases and never an o_proj bias, whatever the config says (Qwen2-MoE: qkv_bias).
    c.attention_bias = c.architecture_name == "Qwen2ForCausalLM" || f.optional_bool("qkv_bias", true);
    c.attention_out_bias = false;
  } else {
    c.attention_bias = f.optional_bool("attention_bias", false);
    c.attention_out_bias = c.attention_bias;
  }
  c.mlp_bias = f.optional_bool("mlp_bias", false);
  if (c.architecture_name == "Phi3ForCausalLM") {
    c.fused_qkv = true;
    c.fused_gate_up = true;
    // Phi-3's fused projections carry no biases; a config that says otherwise names tensors we would not find.
    if (c.attention_bias || c.mlp_bias)
      throw EngineError(ErrorCode::unsupported, f.file + ": attention_bias / mlp_bias true is not supported for "
                                                         "Phi3ForCausalLM (fused qkv_proj / gate_up_proj without biases)");
  }
  read_sliding_window(f, c);
  if (c.architecture_name == "Gemma2ForCausalLM") read_gemma2(f, c);
  if (c.architecture_name.rfind("Qwen", 0) == 0)
    c.qk_norm = c.architecture_name == "Qwen3ForCausalLM" || c.architecture_name == "Qwen3MoeForCausalLM";
  if (c.num_heads % c.num_kv_heads != 0)
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": num_attention_heads (" + std::to_string(c.num_heads) +
                                                     ") is not a multiple of num_key_value_heads (" +
                                                     std::to_string(c.num_kv_heads) + ")");
  if (c.head_dim % 2 != 0)
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": head_dim " + std::to_string(c.head_dim) +
                                                     " must be even for rotary embeddings");
  read_rope_scaling(f, c, "rope_scaling");
  read_rope_scaling(f, c, "rope_parameters");
  refuse_partial_rotary(f);
  read_moe(f, c);
}

void read_gpt2(const Fields& f, ModelConfig& c) {
  c.architecture = Architecture::gpt2;
  c.vocab_size = f.required_int("vocab_size");
  c.hidden_size = f.required_int("n_embd");
  c.num_layers = f.required_int("n_layer");
  c.num_heads = f.required_int("n_head");
  c.num_kv_heads = c.num_heads;
  if (c.hidden_size % c.num_heads != 0)
    throw EngineError(ErrorCode::bad_checkpoint, f.file + ": n_embd (" + std::to_string(c.hidden_size) +
                                                     ") is not a multiple of n_head (" +
                                                     std::to_string(c.num_heads) + ")");
  c.head_dim = c.hidden_size / c.num_heads;
  c.intermediate_size = f.optional_int("n_inner", 4 * c.hidden_size);
  c.max_position_embeddings = f.required_int("n_positions");
  c.norm_eps = f.optional_float("layer_norm_epsilon", 1e-5f);
  c.hidden_act = f.optional_string("activation_function", "gelu_new");
  c.tie_word_embeddings = true;  // GPT2LMHeadModel always ties lm_head to wte
  c.attention_bias = true;
  c.attention_out_bias = true;
  c.mlp_bias = true;
  if (f.optional_bool("scale_attn_by_inverse_layer_idx", false) || f.optional_bool("reorder_and_upcast_attn", false))
    throw EngineError(ErrorCode::unsupported, f.file + ": scale_attn_by_inverse_layer_idx / "
                                                       "reorder_and_upcast_attn are not supported");
  if (!f.optional_bool("scale_attn_weights", true))
    throw EngineError(ErrorCode::unsupported, f.file + ": scale_attn_weights=false is not supported");
}

}  // namespace

int32_t kv_release_window(const ModelConfig& c, int32_t cap) {
  return kv_release_window(c.layer_window, c.num_layers, cap);
}

int32_t kv_release_window(const std::vector<int32_t>& layer_window, int32_t num_layers, int32_t cap) {
  int32_t widest = 0;
  for (int32_t l = 0; l < num_layers; ++l) {
    const int32_t own = layer_window.empty() ? 0 : layer_window[static_cast<size_t>(l)];
    const int32_t w = effective_window(own, cap);
    if (w == 0) return 0;
    widest = std::max(widest, w);
  }
  return widest;
}

ModelConfig load_model_config(const std::string& checkpoint_dir) { return load_model_config(checkpoint_dir, ""); }

ModelConfig load_model_config(const std::string& checkpoint_dir, const std::string& architecture) {
  const std::string path = checkpoint_dir + "/config.json";
  if (!file_exists(path)) throw EngineError(ErrorCode::not_found, "config.json not found: " + path);
  json::Value doc = json::parse_file(path);
  if (!doc.is_object()) throw EngineError(ErrorCode::bad_checkpoint, path + " must hold a JSON object");
  Fields f{doc, path};

  ModelConfig c;
  const json::Value* archs = f.get("architectures");
  if (archs && archs->is_array() && !archs->as_array().empty()) {
    c.architecture_name = archs->as_array()[0].as_string(f.what("architectures"));
  } else if (archs && archs->is_string()) {
    c.architecture_name = archs->as_string();
  } else {
    // Old configs carry only model_type; map the families we know.
    const std::string mt = f.optional_string("model_type", "");
    for (const Family& fam : kFamilies)
      if (mt == fam.model_type) c.architecture_name = fam.architecture;
    if (c.architecture_name.empty())
      throw EngineError(ErrorCode::bad_checkpoint, path + " lacks required field 'architectures'");
  }
  const std::string& a = c.architecture_name;
  const Family* fam = family_named(architecture.empty() ? a : architecture);
  if (fam == nullptr)
    throw EngineError(ErrorCode::unsupported, "architecture '" + a + "' in config.json is not supported; supported: " +
                                                  supported_architectures());
  if (fam->kind == Architecture::llama) read_llama(f, c);
  else read_gpt2(f, c);
  const std::string& act = c.hidden_act;
  if (act != "silu" && act != "swish" && act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh" &&
      act != "relu" && act != "gelu_fast")
    throw EngineError(ErrorCode::unsupported, path + ": activation '" + act +
                                                  "' is not supported; supported: silu, gelu, gelu_new, "
                                                  "gelu_pytorch_tanh, gelu_fast, relu");
  c.torch_dtype = f.optional_string("torch_dtype", f.optional_string("dtype", ""));
  c.quant = read_quant_config(doc, path, checkpoint_dir);
  if (c.quant.quantized() && c.architecture == Architecture::gpt2)
    throw EngineError(ErrorCode::unsupported, c.quant.source + ": FP8 weights are supported for the Llama family "
                                                               "(Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma), not " + a);

  auto one_id = [](const std::vector<int32_t>& ids) { return ids.empty() ? -1 : ids[0]; };
  c.bos_token_id = one_id(f.token_ids("bos_token_id"));
  c.eos_token_ids = f.token_ids("eos_token_id");
  c.pad_token_id = one_id(f.token_ids("pad_token_id"));

  const std::string gen_path = checkpoint_dir + "/generation_config.json";
  if (file_exists(gen_path)) {
    json::Value gen = json::parse_file(gen_path);
    Fields g{gen, gen_path};
    if (g.get("bos_token_id")) c.bos_token_id = one_id(g.token_ids("bos_token_id"));
    if (g.get("eos_token_id")) c.eos_token_ids = g.token_ids("eos_token_id");
    if (g.get("pad_token_id")) c.pad_token_id = one_id(g.token_ids("pad_token_id"));
  }
  return c;
}

}  // namespace engine
