#include "model/model-config.h"

#include <sys/stat.h>

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
    {"mixtral", "MixtralForCausalLM", Architecture::llama},    {"gpt2", "GPT2LMHeadModel", Architecture::gpt2},
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
  if (t != "default" && t != "linear" && t != "llama3")
    throw EngineError(ErrorCode::unsupported, f.file + ": " + key + " type '" + t +
                                                  "' is not supported; supported: default, linear, llama3");
  c.rope_scaling.type = t;
  auto num = [&](const char* key, float fallback) {
    const json::Value* v = rs->find(key);
    return (v && !v->is_null()) ? static_cast<float>(v->as_number(w + "." + key)) : fallback;
  };
  if (t == "default") return;
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

// Rotary embeddings over only part of each head (Phi-4-mini, some GPT-NeoX-style configs) are not implemented. The
// factor sits at the top level (transformers 4.x) or inside rope_parameters / rope_scaling (5.x).
void refuse_partial_rotary(const Fields& f) {
  auto check = [&](const json::Value* v, const std::string& name) {
    if (!v || v->is_null()) return;
    const double x = v->as_number(f.file + ": " + name);
    if (x == 1.0) return;
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", x);
    throw EngineError(ErrorCode::unsupported, f.file + ": " + name + " " + shown +
                                                  " is not supported (rotary embeddings over the whole head only)");
  };
  check(f.get("partial_rotary_factor"), "partial_rotary_factor");
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (const json::Value* obj = f.get(key); obj && obj->is_object())
      check(obj->find("partial_rotary_factor"), std::string(key) + ".partial_rotary_factor");
}

// Mistral's, Mixtral's and Phi-3's `sliding_window` (the Qwen families refuse use_sliding_window true instead): attention
// over the last `sliding_window` positions only. Sequences no longer than the window see the same outputs as under
// full attention, so max_position_embeddings is capped to it (what vLLM does for models it runs without a window).
void read_sliding_window(const Fields& f, ModelConfig& c) {
  const std::string& a = c.architecture_name;
  if (a != "MistralForCausalLM" && a != "MixtralForCausalLM" && a != "Phi3ForCausalLM") return;
  const json::Value* w = f.get("sliding_window");
  if (!w || w->is_null()) return;
  const int64_t window = w->as_int64(f.what("sliding_window"));
  if (window <= 0)
    throw EngineError(ErrorCode::bad_checkpoint,
                      f.file + ": sliding_window must be > 0 or null, got " + std::to_string(window));
  if (window >= c.max_position_embeddings) return;
  c.sliding_window = static_cast<int32_t>(window);
  c.max_position_embeddings = c.sliding_window;
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
  if (c.architecture_name == "GemmaForCausalLM") {
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
  if (c.architecture_name.rfind("Qwen", 0) == 0) {
    c.qk_norm = c.architecture_name == "Qwen3ForCausalLM" || c.architecture_name == "Qwen3MoeForCausalLM";
    // Sliding-window layers are not implemented: a config that turns them on is refused rather than run as
    // full attention (which would give other outputs past the window).
    if (f.optional_bool("use_sliding_window", false))
      throw EngineError(ErrorCode::unsupported, f.file + ": use_sliding_window true is not supported (sliding-window "
                                                         "attention); set it to false or use another checkpoint");
    if (const json::Value* lt = f.get("layer_types"); lt && lt->is_array())
      for (const json::Value& t : lt->as_array())
        if (t.is_string() && t.as_string() != "full_attention")
          throw EngineError(ErrorCode::unsupported, f.file + ": layer_types entry \"" + t.as_string() +
                                                        "\" is not supported (only full_attention)");
  }
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

ModelConfig load_model_config(const std::string& checkpoint_dir) {
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
  const Family* fam = family_named(a);
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
