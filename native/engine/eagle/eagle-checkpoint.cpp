#include "eagle/eagle-checkpoint.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/json.h"
#include "loading/safetensors.h"
#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/llama.h"
#include "parallel/parallel-layout.h"

namespace engine {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& message) { throw EngineError(code, "EAGLE heads: " + message); }

// config.json's architecture: EAGLE-1/2's LlamaForCausalLM (false) or EAGLE-3's LlamaForCausalLMEagle3 (true, also
// under vLLM's name Eagle3LlamaForCausalLM); any other is refused.
bool check_architecture(const json::Value& doc, const std::string& config_path) {
  std::string arch;
  if (const json::Value* a = doc.find("architectures"); a != nullptr && a->is_array() && !a->as_array().empty())
    arch = a->as_array()[0].as_string(config_path + " architectures");
  if (arch == "LlamaForCausalLMEagle3" || arch == "Eagle3LlamaForCausalLM") return true;
  if (arch.find("Eagle3") != std::string::npos || arch.find("Speculator") != std::string::npos)
    fail(ErrorCode::unsupported, config_path + ": architecture " + arch +
                                     " is not read; EAGLE-3 heads are read as LlamaForCausalLMEagle3 (EAGLE's and "
                                     "SGLang's layout, also vLLM's Eagle3LlamaForCausalLM)");
  if (!arch.empty() && arch != "LlamaForCausalLM")
    fail(ErrorCode::unsupported, config_path + ": architecture " + arch +
                                     " is not read; EAGLE-1/2 heads are a LlamaForCausalLM config with their layers, "
                                     "EAGLE-3 heads LlamaForCausalLMEagle3");
  if (doc.find("draft_vocab_size") != nullptr)
    fail(ErrorCode::unsupported, config_path + ": draft_vocab_size is set (EAGLE-3) but the architecture is " +
                                     (arch.empty() ? std::string("not named") : arch) +
                                     "; EAGLE-3 heads are LlamaForCausalLMEagle3");
  return false;
}

// The heads' config must have the model's hidden size and vocabulary (they read its embedding).
void check_model_shape(const ModelConfig& c, const ModelConfig& model, const std::string& config_path) {
  auto same = [&](const char* field, int64_t heads, int64_t mine) {
    if (heads != mine)
      fail(ErrorCode::bad_checkpoint, config_path + ": " + field + " " + std::to_string(heads) +
                                          " but the model's is " + std::to_string(mine) + "; the heads must be the model's");
  };
  same("hidden_size", c.hidden_size, model.hidden_size);
  same("vocab_size", c.vocab_size, model.vocab_size);
}

int64_t int_field(const json::Value& doc, const std::string& key, int64_t fallback, const std::string& config_path) {
  const json::Value* v = doc.find(key);
  return v == nullptr || v->is_null() ? fallback : v->as_int64(config_path + " " + key);
}

// The model's residual streams EAGLE-3 heads read, as the layers they enter (Model::keep_final_hidden's aux_layers:
// 0 the embeddings, L after the last layer). eagle_config.eagle_aux_hidden_state_layer_ids names layer outputs, as
// SGLang reads it (layers_to_capture = id + 1) and as SpecForge and TensorRT-LLM number the layers they capture: id
// i is the stream after layer i, the one entering layer i + 1 (-1: the embeddings); vLLM reads the same ids one
// layer earlier. Without it, the default of vLLM and SGLang: the streams entering layers (2, L // 2, L - 3).
std::vector<int32_t> aux_layer_ids(const json::Value& doc, int32_t L, const std::string& config_path) {
  const json::Value* ec = doc.find("eagle_config");
  const json::Value* list = ec != nullptr && ec->is_object() ? ec->find("eagle_aux_hidden_state_layer_ids") : nullptr;
  const std::string field = "eagle_config.eagle_aux_hidden_state_layer_ids";
  if (ec != nullptr && ec->is_object())
    if (const json::Value* use = ec->find("use_aux_hidden_state"); use != nullptr && use->is_bool() && !use->as_bool())
      fail(ErrorCode::unsupported, config_path + ": eagle_config.use_aux_hidden_state is false (fc reads no model "
                                                 "layers); EAGLE-3 heads that read the model's layers are read");
  auto text = [](const std::vector<int32_t>& ids) {
    std::string t;
    for (int32_t x : ids) t += (t.empty() ? "" : ", ") + std::to_string(x);
    return "[" + t + "]";
  };
  std::vector<int32_t> entering;
  if (list != nullptr && !list->is_null()) {
    if (!list->is_array() || list->as_array().empty())
      fail(ErrorCode::bad_checkpoint, config_path + ": " + field + " must be a non-empty list of layer ids");
    std::vector<int32_t> ids;
    for (const json::Value& v : list->as_array())
      ids.push_back(static_cast<int32_t>(v.as_int64(config_path + " " + field)));
    for (int32_t id : ids) {
      if (id < -1 || id >= L)
        fail(ErrorCode::bad_checkpoint, config_path + ": " + field + " is " + text(ids) + ": layer " +
                                            std::to_string(id) + " is outside the model's -1.." + std::to_string(L - 1) +
                                            " (id i: the residual stream after layer i; -1: the embeddings)");
      entering.push_back(id + 1);
    }
    return entering;
  }
  entering = {2, L / 2, L - 3};
  for (int32_t l : entering)
    if (l < 0 || l > L)
      fail(ErrorCode::bad_checkpoint, config_path + ": no " + field + ", and the default, the streams entering layers "
                                          "(2, L // 2, L - 3) of the model's " + std::to_string(L) + ", is " +
                                          text(entering) + ": layer " + std::to_string(l) + " is outside 0.." +
                                          std::to_string(L) + "; name the layers in " + field);
  return entering;
}

// d2t [draft vocab] (int64): target id = draft id + d2t[draft id], each inside the model's vocabulary.
std::vector<int32_t> read_d2t(const Checkpoint& heads, const std::string& name, int64_t Vd, int64_t V) {
  const TensorInfo& t = heads.info(name);
  if (t.dtype != DType::i64 || t.shape != std::vector<int64_t>{Vd})
    fail(ErrorCode::bad_checkpoint, heads.source() + ": " + name + " is " + t.dtype_name + " " +
                                        shape_to_string(t.shape) + "; the heads' draft_vocab_size " +
                                        std::to_string(Vd) + " needs I64 [" + std::to_string(Vd) + "]");
  std::vector<int32_t> ids(static_cast<size_t>(Vd));
  for (int64_t i = 0; i < Vd; ++i) {
    int64_t d = 0;
    std::memcpy(&d, t.data + i * 8, 8);
    const int64_t target = i + d;
    if (target < 0 || target >= V)
      fail(ErrorCode::bad_checkpoint, heads.source() + ": " + name + "[" + std::to_string(i) + "] = " +
                                          std::to_string(d) + " maps draft id " + std::to_string(i) + " to " +
                                          std::to_string(target) + ", outside the model's vocab_size " +
                                          std::to_string(V));
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(target);
  }
  return ids;
}

// EAGLE-3 heads (the layout EAGLE-3 publishes, read alike by vLLM's llama_eagle3.py and SGLang's): config.json is
// a LlamaConfig of one layer with draft_vocab_size (+ target_hidden_size, eagle_config), the file holds fc.weight
// [hidden, 3 * hidden], the layer as midlayer.* (or layers.0.*) with hidden_norm and q/k/v over [2 * hidden],
// norm.weight, lm_head.weight [draft_vocab_size, hidden] and d2t (t2d is not needed: guesses map draft to target).
std::unique_ptr<Model> load_eagle3_heads(const std::string& dir, const json::Value& doc, const std::string& model_dir,
                                         const ModelConfig& model, int32_t num_threads) {
  const std::string config_path = dir + "/config.json";
  const int64_t H = model.hidden_size, V = model.vocab_size;
  ModelConfig c = load_model_config(dir, "LlamaForCausalLM");
  check_model_shape(c, model, config_path);
  if (const int64_t th = int_field(doc, "target_hidden_size", H, config_path); th != H)
    fail(ErrorCode::bad_checkpoint, config_path + ": target_hidden_size " + std::to_string(th) +
                                        " but the model's hidden_size is " + std::to_string(H));
  if (c.num_layers != 1)
    fail(ErrorCode::unsupported, config_path + ": num_hidden_layers " + std::to_string(c.num_layers) +
                                     "; EAGLE-3 heads of one layer are read");
  if (const json::Value* nbr = doc.find("norm_before_residual"); nbr != nullptr && nbr->is_bool() && nbr->as_bool())
    fail(ErrorCode::unsupported, config_path + ": norm_before_residual is true; EAGLE-3 heads whose residual is the "
                                               "hidden input before its norm (the default) are read");
  const int64_t Vd = int_field(doc, "draft_vocab_size", V, config_path);
  if (Vd <= 0 || Vd > V)
    fail(ErrorCode::bad_checkpoint, config_path + ": draft_vocab_size " + std::to_string(Vd) +
                                        " must be 1.." + std::to_string(V) + " (the model's vocab_size)");
  const std::vector<int32_t> aux = aux_layer_ids(doc, model.num_layers, config_path);
  const int64_t F = static_cast<int64_t>(aux.size()) * H;

  const Checkpoint heads(dir);
  const std::string prefix = heads.has("fc.weight") || !heads.has("model.fc.weight") ? "" : "model.";
  const std::string layer = heads.has(prefix + "midlayer.self_attn.q_proj.weight") ||
                                    !heads.has(prefix + "layers.0.self_attn.q_proj.weight")
                                ? "midlayer."
                                : "layers.0.";
  c.attention_bias = heads.has(prefix + layer + "self_attn.q_proj.bias");
  c.attention_out_bias = heads.has(prefix + layer + "self_attn.o_proj.bias");
  c.mlp_bias = heads.has(prefix + layer + "mlp.gate_proj.bias");
  LoadOptions options;
  options.num_threads = num_threads;
  WeightReader r(heads, options);
  Linear fc;
  fc.out = H;
  fc.in = F;
  fc.w = r.read(prefix + "fc.weight", {H, F});
  if (r.has(prefix + "fc.bias")) fc.b = r.read(prefix + "fc.bias", {H});
  Norm final_norm;
  final_norm.w = r.read(prefix + "norm.weight", {H});
  std::vector<float> lm_head;
  std::vector<int32_t> ids;
  if (r.has("lm_head.weight") || Vd < V) {
    lm_head = r.read("lm_head.weight", {Vd, H});
    if (heads.has("d2t") || Vd < V) ids = read_d2t(heads, "d2t", Vd, V);
    if (ids.empty()) {  // (the whole vocabulary in order)
      ids.resize(static_cast<size_t>(Vd));
      for (int64_t i = 0; i < Vd; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    }
  }
  std::vector<float> embed;
  if (r.has(prefix + "embed_tokens.weight")) embed = r.read(prefix + "embed_tokens.weight", {V, H});
  LlamaTensors names;
  names.eagle = names.eagle3 = true;
  names.prefix = prefix;
  names.layer = layer;
  DecoderWeights w = read_llama_weights(c, r, make_parallel_layout(c, ShardInfo{}), names);
  w.fc = std::move(fc);
  w.fc_layers = aux;
  w.final_norm = std::move(final_norm);
  w.lm_head = std::move(lm_head);
  w.lm_head_ids = std::move(ids);

  // The embedding (the heads' own when they carry one, as vLLM reads them) and, without an LM head of the heads'
  // own, the model's.
  const Checkpoint target(model_dir);
  WeightReader t(target, options, model.quant);
  w.embed = embed.empty() ? t.read("model.embed_tokens.weight", {V, H}) : std::move(embed);
  if (w.lm_head.empty() && !model.tie_word_embeddings && t.has("lm_head.weight"))
    w.lm_head = t.read("lm_head.weight", {V, H});
  c.final_softcap = model.final_softcap;
  const DecoderSpec spec = llama_spec(c);
  return std::make_unique<DecoderModel>(std::move(c), spec, std::move(w), num_threads);
}

}  // namespace

std::unique_ptr<Model> load_eagle_heads(const std::string& dir, const std::string& model_dir, const ModelConfig& model,
                                        int32_t num_threads) {
  namespace fs = std::filesystem;
  const std::string config_path = dir + "/config.json";
  if (!fs::is_directory(dir)) fail(ErrorCode::not_found, dir + " is not a directory");
  if (!fs::exists(config_path)) fail(ErrorCode::not_found, config_path + " does not exist");
  const json::Value doc = json::parse_file(config_path);
  if (!doc.is_object()) fail(ErrorCode::bad_checkpoint, config_path + " must hold a JSON object");
  const bool eagle3 = check_architecture(doc, config_path);
  if (!fs::exists(dir + "/model.safetensors") && !fs::exists(dir + "/model.safetensors.index.json")) {
    if (fs::exists(dir + "/pytorch_model.bin"))
      fail(ErrorCode::unsupported, pickle_refusal(dir, "pytorch_model.bin", "model.safetensors"));
    fail(ErrorCode::not_found, dir + "/model.safetensors does not exist");
  }
  if (model.architecture != Architecture::llama)
    fail(ErrorCode::unsupported, "the model is " + model.architecture_name +
                                     "; EAGLE heads are read for Llama-family models (their embedding and LM head)");
  if (eagle3) return load_eagle3_heads(dir, doc, model_dir, model, num_threads);
  ModelConfig c = load_model_config(dir);
  const int64_t H = model.hidden_size, V = model.vocab_size;
  check_model_shape(c, model, config_path);

  const Checkpoint heads(dir);
  const std::string prefix = heads.has("fc.weight") || !heads.has("model.fc.weight") ? "" : "model.";
  // Biases as the file has them (EAGLE's configs do not always say).
  const std::string l0 = prefix + "layers.0.";
  c.attention_bias = heads.has(l0 + "self_attn.q_proj.bias");
  c.attention_out_bias = heads.has(l0 + "self_attn.o_proj.bias");
  c.mlp_bias = heads.has(l0 + "mlp.gate_proj.bias");
  LoadOptions options;
  options.num_threads = num_threads;
  WeightReader r(heads, options);
  Linear fc;
  fc.out = H;
  fc.in = 2 * H;
  fc.w = r.read(prefix + "fc.weight", {H, 2 * H});
  if (r.has(prefix + "fc.bias")) fc.b = r.read(prefix + "fc.bias", {H});
  LlamaTensors names;
  names.eagle = true;
  names.prefix = prefix;
  DecoderWeights w = read_llama_weights(c, r, make_parallel_layout(c, ShardInfo{}), names);
  w.fc = std::move(fc);

  // The model's embedding and LM head, whole (the draft runs on the leading rank alone).
  const Checkpoint target(model_dir);
  WeightReader t(target, options, model.quant);
  w.embed = t.read("model.embed_tokens.weight", {V, H});
  if (!model.tie_word_embeddings && t.has("lm_head.weight")) w.lm_head = t.read("lm_head.weight", {V, H});
  c.final_softcap = model.final_softcap;
  const DecoderSpec spec = llama_spec(c);
  return std::make_unique<DecoderModel>(std::move(c), spec, std::move(w), num_threads);
}

}  // namespace engine
