#include "eagle/eagle-checkpoint.h"

#include <filesystem>

#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/json.h"
#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/llama.h"
#include "parallel/parallel-layout.h"

namespace engine {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& message) { throw EngineError(code, "EAGLE heads: " + message); }

// config.json's architecture, refused unless it is EAGLE-1/2's LlamaForCausalLM (EAGLE-3's fused three-layer input
// and own vocabulary are not read yet).
void check_architecture(const std::string& config_path) {
  const json::Value doc = json::parse_file(config_path);
  if (!doc.is_object()) fail(ErrorCode::bad_checkpoint, config_path + " must hold a JSON object");
  std::string arch;
  if (const json::Value* a = doc.find("architectures"); a != nullptr && a->is_array() && !a->as_array().empty())
    arch = a->as_array()[0].as_string(config_path + " architectures");
  const bool eagle3 = arch.find("Eagle3") != std::string::npos || doc.find("draft_vocab_size") != nullptr;
  if (eagle3)
    fail(ErrorCode::unsupported, config_path + ": architecture " + (arch.empty() ? "(draft_vocab_size set)" : arch) +
                                     " is EAGLE-3, which is not read yet (fc over three layers' hidden states, a draft "
                                     "vocabulary); EAGLE-1/2 heads (LlamaForCausalLM) are");
  if (!arch.empty() && arch != "LlamaForCausalLM")
    fail(ErrorCode::unsupported, config_path + ": architecture " + arch +
                                     " is not read; EAGLE-1/2 heads are a LlamaForCausalLM config with their layers");
}

}  // namespace

std::unique_ptr<Model> load_eagle_heads(const std::string& dir, const std::string& model_dir, const ModelConfig& model,
                                        int32_t num_threads) {
  namespace fs = std::filesystem;
  const std::string config_path = dir + "/config.json";
  if (!fs::is_directory(dir)) fail(ErrorCode::not_found, dir + " is not a directory");
  if (!fs::exists(config_path)) fail(ErrorCode::not_found, config_path + " does not exist");
  check_architecture(config_path);
  if (!fs::exists(dir + "/model.safetensors") && !fs::exists(dir + "/model.safetensors.index.json")) {
    if (fs::exists(dir + "/pytorch_model.bin"))
      fail(ErrorCode::unsupported,
           dir + " has only pytorch_model.bin, a pickle, and pickles are not read; convert it once with "
                 "python -c \"import torch; from safetensors.torch import save_file; "
                 "save_file(torch.load('pytorch_model.bin', map_location='cpu'), 'model.safetensors')\"");
    fail(ErrorCode::not_found, dir + "/model.safetensors does not exist");
  }
  if (model.architecture != Architecture::llama)
    fail(ErrorCode::unsupported, "the model is " + model.architecture_name +
                                     "; EAGLE heads are read for Llama-family models (their embedding and LM head)");
  ModelConfig c = load_model_config(dir);
  const int64_t H = model.hidden_size, V = model.vocab_size;
  if (c.hidden_size != H)
    fail(ErrorCode::bad_checkpoint, config_path + ": hidden_size " + std::to_string(c.hidden_size) +
                                        " but the model's is " + std::to_string(H) + "; the heads must be the model's");
  if (c.vocab_size != V)
    fail(ErrorCode::bad_checkpoint, config_path + ": vocab_size " + std::to_string(c.vocab_size) +
                                        " but the model's is " + std::to_string(V) + "; the heads must be the model's");

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
  DecoderWeights w = read_llama_weights(c, r, make_parallel_layout(c, ShardInfo{}), LlamaTensors{true, prefix});
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
