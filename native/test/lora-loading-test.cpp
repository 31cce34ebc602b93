// LoRA adapters into the engine's form: PEFT directories (values, folded scales, rank/alpha patterns, rsLoRA,
// dtypes, adapter names, fused Phi-3 and GPT-2 module names), TensorRT-LLM's lora_weights / lora_config rows,
// every refusal naming its numbers, and a rank's slice of an adapter (tp, pp, replicated kv heads) adding up to
// the whole delta.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "errors.h"
#include "loading/safetensors.h"
#include "lora/lora-adapter.h"
#include "lora/lora-local.h"
#include "lora/lora-tensors.h"
#include "lora/peft-adapter.h"
#include "parallel/parallel-layout.h"
#include "temp-dir.h"

using namespace engine;

namespace {

// The tiny-llama fixture's shapes (test/fixtures/models/tiny-llama/config.json).
ModelConfig tiny_llama() {
  ModelConfig c;
  c.architecture = Architecture::llama;
  c.architecture_name = "LlamaForCausalLM";
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 160;
  c.max_position_embeddings = 256;
  return c;
}

ModelConfig tiny_gpt2() {
  ModelConfig c = tiny_llama();
  c.architecture = Architecture::gpt2;
  c.architecture_name = "GPT2LMHeadModel";
  c.num_kv_heads = 4;
  c.intermediate_size = 256;
  return c;
}

// Layer 1 of two is a mixture-of-experts layer (Qwen2-MoE with mlp_only_layers [0]).
ModelConfig tiny_moe() {
  ModelConfig c = tiny_llama();
  c.architecture_name = "Qwen2MoeForCausalLM";
  c.moe.num_experts = 4;
  c.moe.top_k = 2;
  c.moe.expert_inter = 32;
  c.moe.sparse = {false, true};
  return c;
}

struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 2654435761u + 1) {}
  float next() {  // [-0.5, 0.5)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
  }
  std::vector<float> values(int64_t n, float scale = 1.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = next() * scale;
    return v;
  }
};

// ---- PEFT directories ----

struct PeftTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::vector<uint8_t> bytes_of(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out;
  for (float f : values) {
    if (dtype == DType::f32) {
      uint8_t b[4];
      std::memcpy(b, &f, 4);
      out.insert(out.end(), b, b + 4);
    } else {
      const uint16_t h = dtype == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      out.push_back(static_cast<uint8_t>(h));
      out.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return out;
}

// What a value reads back as after storing it in `dtype`.
float stored(float v, DType dtype) {
  if (dtype == DType::bf16) return bf16_to_f32(f32_to_bf16(v));
  if (dtype == DType::f16) return f16_to_f32(f32_to_f16(v));
  return v;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string write_peft(const std::string& config_json, const std::vector<PeftTensor>& tensors,
                       DType dtype = DType::f32) {
  const std::string dir = test::make_temp_dir("lora-loading");
  write_text(dir + "/adapter_config.json", config_json);
  std::vector<TensorToWrite> out;
  for (const PeftTensor& t : tensors) out.push_back({t.name, dtype, t.shape, bytes_of(t.values, dtype)});
  write_safetensors(dir + "/adapter_model.safetensors", out);
  return dir;
}

// "base_model.model.model.layers.<l>.<kind>.lora_<A|B>[.<adapter>].weight"
std::string peft_name(int32_t layer, const std::string& kind, const char* ab, const std::string& adapter = "") {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + kind + ".lora_" + ab +
         (adapter.empty() ? "" : "." + adapter) + ".weight";
}

// A and B of one module, seeded by their place so every (layer, module) differs.
void add_pair(std::vector<PeftTensor>& ts, int32_t layer, const std::string& kind, int64_t rank, int64_t in,
              int64_t out, const std::string& adapter = "", const std::string& prefix = "") {
  Rng rng(static_cast<uint64_t>(layer * 131 + static_cast<int64_t>(kind.size()) * 7 + rank * 3 + in + out));
  auto name = [&](const char* ab) {
    return prefix.empty() ? peft_name(layer, kind, ab, adapter)
                          : prefix + std::to_string(layer) + "." + kind + ".lora_" + ab + ".weight";
  };
  ts.push_back({name("A"), {rank, in}, rng.values(rank * in)});
  ts.push_back({name("B"), {out, rank}, rng.values(out * rank)});
}

const LoraWeight* find_weight(const LoraAdapter& a, int32_t layer, LoraModule m) {
  for (const LoraWeight& w : a.weights)
    if (w.layer == layer && w.module == m) return &w;
  return nullptr;
}

// Every value of a loaded weight against the tensors it came from: A as stored, B as stored times `scale`
// (in double, rounded to float once, as the loader folds it); B's rows [row0, row0 + w.out) when split.
bool weight_matches(const LoraWeight* w, const PeftTensor& a, const PeftTensor& b, double scale, DType dtype,
                    int64_t row0 = 0) {
  if (w == nullptr || w->rank != a.shape[0] || w->in != a.shape[1] || w->b.size() != size_t(w->out * w->rank))
    return false;
  for (size_t i = 0; i < a.values.size(); ++i)
    if (w->a[i] != stored(a.values[i], dtype)) return false;
  for (int64_t i = 0; i < w->out * w->rank; ++i) {
    const float want = static_cast<float>(static_cast<double>(stored(b.values[size_t(row0 * w->rank + i)], dtype)) * scale);
    if (w->b[size_t(i)] != want) return false;
  }
  return true;
}

const PeftTensor& tensor_named(const std::vector<PeftTensor>& ts, const std::string& name) {
  for (const PeftTensor& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("test bug: no tensor " + name);
}

// Throws EngineError with `code` and every one of `parts` in its message.
void expect_error(const std::function<void()>& fn, ErrorCode code, const std::vector<std::string>& parts) {
  std::string what = "(no error)";
  bool right_code = false;
  try {
    fn();
  } catch (const EngineError& e) {
    what = e.what();
    right_code = e.code() == code;
  } catch (const std::exception& e) {
    what = std::string("non-EngineError: ") + e.what();
  }
  bool all = right_code;
  for (const std::string& p : parts) all = all && what.find(p) != std::string::npos;
  CHECK_MSG(all, "expected %s error containing '%s'..., got '%s'", error_code_name(code),
            parts.empty() ? "" : parts[0].c_str(), what.c_str());
}

const std::string kConfig = R"({
  "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": "tiny-llama",
  "r": 4, "lora_alpha": 8, "use_rslora": RSLORA, "use_dora": false, "bias": "none", "fan_in_fan_out": false,
  "modules_to_save": null, "layers_to_transform": null, "layers_pattern": null,
  "target_modules": ["q_proj", "v_proj", "down_proj"],
  "rank_pattern": {"v_proj": 2},
  "alpha_pattern": {"v_proj": 6, "layers\\.1\\.mlp\\.down_proj": 2}
})";

std::string config_with(bool rslora) {
  std::string c = kConfig;
  c.replace(c.find("RSLORA"), 6, rslora ? "true" : "false");
  return c;
}

// (1) q, v, down on both layers: every value and every folded scale, in f32 / bf16 / f16, with and without
// ".default", with and without rsLoRA.
void peft_values() {
  const ModelConfig c = tiny_llama();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const std::string adapter : {"", "default"})
      for (bool rslora : {false, true}) {
        std::vector<PeftTensor> ts;
        for (int32_t l = 0; l < 2; ++l) {
          add_pair(ts, l, "self_attn.q_proj", 4, 64, 64, adapter);
          add_pair(ts, l, "self_attn.v_proj", 2, 64, 32, adapter);
          add_pair(ts, l, "mlp.down_proj", 4, 160, 64, adapter);
        }
        const LoraAdapter a = load_peft_adapter(write_peft(config_with(rslora), ts, dtype), c, 64);
        CHECK(a.weights.size() == 6);
        CHECK(a.max_rank() == 4);
        size_t floats = 0;
        for (const PeftTensor& t : ts) floats += t.values.size();
        CHECK(a.bytes() == floats * sizeof(float));
        auto sc = [&](double alpha, double r) { return rslora ? alpha / std::sqrt(r) : alpha / r; };
        for (int32_t l = 0; l < 2; ++l) {
          auto pair_ok = [&](LoraModule m, const std::string& kind, double scale) {
            return weight_matches(find_weight(a, l, m), tensor_named(ts, peft_name(l, kind, "A", adapter)),
                                  tensor_named(ts, peft_name(l, kind, "B", adapter)), scale, dtype);
          };
          CHECK_MSG(pair_ok(LoraModule::attn_q, "self_attn.q_proj", sc(8, 4)), "layer %d q", l);
          // rank_pattern 2, alpha_pattern 6: scale 3 (rsLoRA 6 / sqrt 2)
          CHECK_MSG(pair_ok(LoraModule::attn_v, "self_attn.v_proj", sc(6, 2)), "layer %d v", l);
          // the regex key gives layer 1's down_proj alpha 2; layer 0 keeps lora_alpha 8
          CHECK_MSG(pair_ok(LoraModule::mlp_4h_to_h, "mlp.down_proj", l == 1 ? sc(2, 4) : sc(8, 4)), "layer %d down",
                    l);
          const LoraWeight* v = find_weight(a, l, LoraModule::attn_v);
          CHECK(v && v->rank == 2 && v->in == 64 && v->out == 32);
        }
        CHECK(find_weight(a, 0, LoraModule::attn_k) == nullptr);
      }
  // A scale that is not a power of two, against its decimal value (not only the loader's own formula).
  std::vector<PeftTensor> ts;
  add_pair(ts, 0, "self_attn.v_proj", 2, 64, 32);
  const LoraAdapter a = load_peft_adapter(write_peft(config_with(true), ts), c, 64);
  const LoraWeight* v = find_weight(a, 0, LoraModule::attn_v);
  CHECK(v && std::fabs(v->b[5] - ts[1].values[5] * 4.242640687f) < 1e-6f);
}

// Phi-3's fused qkv_proj / gate_up_proj on a Llama-family model, and GPT-2's Conv1D names (fan_in_fan_out).
void peft_fused_and_gpt2() {
  const ModelConfig c = tiny_llama();
  const std::string cfg = R"({"r": 4, "lora_alpha": 4, "target_modules": ["qkv_proj", "gate_up_proj"]})";
  std::vector<PeftTensor> ts;
  add_pair(ts, 1, "self_attn.qkv_proj", 4, 64, 128);
  add_pair(ts, 1, "mlp.gate_up_proj", 4, 64, 320);
  const LoraAdapter a = load_peft_adapter(write_peft(cfg, ts), c, 8);
  CHECK(a.weights.size() == 3);
  const PeftTensor& gu_a = tensor_named(ts, peft_name(1, "mlp.gate_up_proj", "A"));
  const PeftTensor& gu_b = tensor_named(ts, peft_name(1, "mlp.gate_up_proj", "B"));
  const LoraWeight* gate = find_weight(a, 1, LoraModule::mlp_h_to_4h);
  const LoraWeight* up = find_weight(a, 1, LoraModule::mlp_gate);
  CHECK(gate && gate->out == 160 && up && up->out == 160);
  CHECK(weight_matches(gate, gu_a, gu_b, 1.0, DType::f32, 0));
  CHECK(weight_matches(up, gu_a, gu_b, 1.0, DType::f32, 160));
  CHECK(weight_matches(find_weight(a, 1, LoraModule::attn_qkv), tensor_named(ts, peft_name(1, "self_attn.qkv_proj", "A")),
                       tensor_named(ts, peft_name(1, "self_attn.qkv_proj", "B")), 1.0, DType::f32));

  const ModelConfig g = tiny_gpt2();
  const std::string gcfg = R"({"r": 2, "lora_alpha": 1, "fan_in_fan_out": true,
                              "target_modules": ["c_attn", "c_proj", "c_fc"]})";
  std::vector<PeftTensor> gs;
  const std::string prefix = "base_model.model.transformer.h.";
  add_pair(gs, 0, "attn.c_attn", 2, 64, 192, "", prefix);
  add_pair(gs, 0, "attn.c_proj", 2, 64, 64, "", prefix);
  add_pair(gs, 1, "mlp.c_fc", 2, 64, 256, "", prefix);
  add_pair(gs, 1, "mlp.c_proj", 2, 256, 64, "", prefix);
  const LoraAdapter ga = load_peft_adapter(write_peft(gcfg, gs), g, 8);
  CHECK(ga.weights.size() == 4);
  CHECK(weight_matches(find_weight(ga, 0, LoraModule::attn_qkv), gs[0], gs[1], 0.5, DType::f32));
  CHECK(weight_matches(find_weight(ga, 0, LoraModule::attn_dense), gs[2], gs[3], 0.5, DType::f32));
  CHECK(weight_matches(find_weight(ga, 1, LoraModule::mlp_h_to_4h), gs[4], gs[5], 0.5, DType::f32));
  CHECK(weight_matches(find_weight(ga, 1, LoraModule::mlp_4h_to_h), gs[6], gs[7], 0.5, DType::f32));
}

// (2) Every refusal of a PEFT directory, by code and with its numbers.
void peft_refusals() {
  const ModelConfig c = tiny_llama();
  const std::string plain = R"({"r": 4, "lora_alpha": 8})";
  std::vector<PeftTensor> q;
  add_pair(q, 0, "self_attn.q_proj", 4, 64, 64);
  auto load = [&](const std::string& dir, const ModelConfig& cfg = tiny_llama(), int32_t max_rank = 64) {
    return [dir, cfg, max_rank] { load_peft_adapter(dir, cfg, max_rank); };
  };
  auto with_config = [&](const std::string& json, const std::vector<PeftTensor>& ts = {}) {
    return write_peft(json, ts.empty() ? q : ts);
  };

  // Files
  const std::string empty = test::make_temp_dir("lora-loading");
  expect_error(load(empty), ErrorCode::not_found, {empty + "/adapter_config.json"});
  write_text(empty + "/adapter_config.json", plain);
  expect_error(load(empty), ErrorCode::not_found, {empty + "/adapter_model.safetensors"});
  write_text(empty + "/adapter_model.bin", "pickle");
  expect_error(load(empty), ErrorCode::unsupported, {"adapter_model.bin", "pickles are not read", "safe_serialization"});

  // adapter_config.json
  expect_error(load(with_config(R"({"r": 4, "use_dora": true})")), ErrorCode::unsupported,
               {"use_dora is not supported"});
  expect_error(load(with_config(R"({"r": 4, "bias": "lora_only"})")), ErrorCode::unsupported, {"bias 'lora_only'"});
  expect_error(load(with_config(R"({"r": 4, "modules_to_save": ["lm_head", "score"]})")), ErrorCode::unsupported,
               {"modules_to_save ['lm_head', 'score']"});
  expect_error(load(with_config(R"({"peft_type": "IA3"})")), ErrorCode::unsupported, {"peft_type 'IA3'"});
  expect_error(load(with_config(R"({"r": "four"})")), ErrorCode::bad_checkpoint, {"adapter_config.json r"});
  expect_error(load(with_config(R"({"r": 4, "lora_bias": true})")), ErrorCode::unsupported, {"lora_bias"});
  expect_error(load(with_config(R"({"r": 4, "rank_pattern": {"q_(": 2}})")), ErrorCode::bad_checkpoint,
               {"rank_pattern key 'q_('"});
  // A rank_pattern that disagrees with the stored rank: the scale would be wrong
  expect_error(load(with_config(R"({"r": 4, "rank_pattern": {"q_proj": 8}})")), ErrorCode::bad_checkpoint,
               {"lora_A is [4, 64] (rank 4)", "r 8 (rank_pattern 'q_proj')"});
  // PEFT's order: a key equal to the module's name wins over an earlier suffix key
  {
    std::vector<PeftTensor> two;
    add_pair(two, 0, "self_attn.q_proj", 2, 64, 64);
    add_pair(two, 1, "self_attn.q_proj", 4, 64, 64);
    const LoraAdapter a = load_peft_adapter(
        write_peft(R"({"r": 8, "lora_alpha": 8, "rank_pattern": {"q_proj": 2, "model.layers.1.self_attn.q_proj": 4}})",
                   two),
        c, 64);
    CHECK(a.weights.size() == 2 && a.weights[0].rank == 2 && a.weights[1].rank == 4);
    CHECK(weight_matches(find_weight(a, 1, LoraModule::attn_q), two[2], two[3], 2.0, DType::f32));
  }
  // modules_to_save as an empty list is fine
  CHECK(load_peft_adapter(with_config(R"({"r": 4, "modules_to_save": []})"), c, 64).weights.size() == 1);

  // Tensors the engine has no LoRA module for
  auto one = [&](const std::string& name, std::vector<int64_t> shape) {
    std::vector<PeftTensor> ts = q;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    ts.push_back({name, shape, std::vector<float>(size_t(n), 0.5f)});
    return write_peft(plain, ts);
  };
  expect_error(load(one("base_model.model.model.embed_tokens.lora_embedding_A", {4, 512})), ErrorCode::unsupported,
               {"'base_model.model.model.embed_tokens.lora_embedding_A'", "embeddings"});
  expect_error(load(one("base_model.model.lm_head.lora_A.weight", {4, 64})), ErrorCode::unsupported,
               {"'base_model.model.lm_head.lora_A.weight'", "not in a decoder layer"});
  expect_error(load(one("base_model.model.model.embed_tokens.lora_A.weight", {4, 512})), ErrorCode::unsupported,
               {"'base_model.model.model.embed_tokens.lora_A.weight'"});
  expect_error(load(one(peft_name(0, "mlp.experts.3.gate_proj", "A"), {4, 64})), ErrorCode::unsupported,
               {"mlp.experts.3.gate_proj", "mixture-of-experts"});
  expect_error(load(one(peft_name(0, "mlp.gate", "A"), {4, 64})), ErrorCode::unsupported,
               {"module 'mlp.gate' has no LoRA module on LlamaForCausalLM"});
  expect_error(load(one(peft_name(0, "attn.c_attn", "A"), {4, 64})), ErrorCode::unsupported, {"'attn.c_attn'"});
  expect_error(load(one("base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias", {64})),
               ErrorCode::unsupported, {"lora_B biases"});
  expect_error(load(one(peft_name(0, "self_attn.q_proj", "A", "other"), {4, 64})), ErrorCode::unsupported,
               {"several adapter names", "'other'"});
  expect_error(load(one("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector.weight", {64})),
               ErrorCode::unsupported,
               {"use_dora"});

  // Shapes against the model (check_lora_adapter's wording, naming the directory)
  std::vector<PeftTensor> ts;
  add_pair(ts, 0, "self_attn.k_proj", 4, 64, 96);
  std::string dir = write_peft(plain, ts);
  expect_error(load(dir), ErrorCode::invalid_argument,
               {dir + ": layer 0 attn_k: lora_B is [96, 4] but k_proj of this model has 32 output rows "
                      "(num_key_value_heads 2 x head_dim 16)"});
  ts.clear();
  add_pair(ts, 1, "self_attn.o_proj", 4, 60, 64);
  expect_error(load(write_peft(plain, ts)), ErrorCode::invalid_argument,
               {"layer 1 attn_dense: lora_A is [4, 60] but o_proj of this model has 64 input columns "
                "(num_attention_heads 4 x head_dim 16)"});
  ts.clear();
  add_pair(ts, 0, "self_attn.q_proj", 128, 64, 64);
  expect_error(load(write_peft(R"({"r": 128, "lora_alpha": 8})", ts)), ErrorCode::invalid_argument,
               {"layer 0 attn_q: rank 128 is above lora_cache_max_adapter_size 64"});
  ts.clear();
  add_pair(ts, 40, "self_attn.q_proj", 4, 64, 64);
  expect_error(load(write_peft(plain, ts)), ErrorCode::invalid_argument,
               {"layer 40 attn_q: layer 40 >= num_hidden_layers 2"});
  ts.clear();
  add_pair(ts, 1, "mlp.down_proj", 4, 160, 64);
  expect_error(load(write_peft(plain, ts), tiny_moe()), ErrorCode::invalid_argument,
               {"layer 1 mlp_4h_to_h: layer 1 is a mixture-of-experts layer (4 experts)"});
  CHECK(load_peft_adapter(write_peft(plain, {ts[0], ts[1]}), tiny_llama(), 64).weights.size() == 1);
  ts.clear();
  add_pair(ts, 0, "mlp.up_proj", 4, 64, 256);
  expect_error(load(write_peft(plain, ts), tiny_gpt2()), ErrorCode::unsupported, {"'mlp.up_proj'", "GPT2LMHeadModel"});

  // Pairs
  ts = {q[0]};
  expect_error(load(write_peft(plain, ts)), ErrorCode::bad_checkpoint,
               {"model.layers.0.self_attn.q_proj has lora_A but no lora_B"});
  ts = {q[0], {q[1].name, {64, 2}, std::vector<float>(128, 0.f)}};
  expect_error(load(write_peft(plain, ts)), ErrorCode::bad_checkpoint, {"lora_A is [4, 64] and lora_B is [64, 2]"});
  ts.clear();
  add_pair(ts, 0, "mlp.gate_up_proj", 4, 64, 321);
  expect_error(load(write_peft(plain, ts)), ErrorCode::bad_checkpoint, {"[321, 4]", "even"});
  expect_error(load(write_peft(R"({"r": 4, "target_modules": ["q_proj", "v_proj"]})", std::vector<PeftTensor>{})),
               ErrorCode::bad_checkpoint, {"no LoRA weights", "['q_proj', 'v_proj']"});
}

// check_lora_adapter on adapters built by hand: what no loader produces but a caller could.
void check_refusals() {
  const ModelConfig c = tiny_llama();
  LoraWeight w;
  w.layer = 1;
  w.module = LoraModule::attn_v;
  w.rank = 2;
  w.in = 64;
  w.out = 32;
  w.a.assign(128, 0.25f);
  w.b.assign(64, 0.5f);
  LoraAdapter a{{w}};
  check_lora_adapter(a, c, 8, "src");  // (a throw fails the test)
  LoraAdapter twice{{w, w}};
  expect_error([&] { check_lora_adapter(twice, c, 8, "src"); }, ErrorCode::invalid_argument,
               {"src: layer 1 attn_v: given twice"});
  LoraAdapter nan = a;
  nan.weights[0].b[3] = std::nanf("");
  expect_error([&] { check_lora_adapter(nan, c, 8, "src"); }, ErrorCode::invalid_argument, {"layer 1 attn_v: B[3] is"});
  LoraAdapter short_a = a;
  short_a.weights[0].a.resize(100);
  expect_error([&] { check_lora_adapter(short_a, c, 8, "src"); }, ErrorCode::invalid_argument,
               {"A holds 100 values, rank 2 x in 64 needs 128"});
  LoraAdapter past_end = a;
  past_end.weights[0].layer = 2;
  expect_error([&] { check_lora_adapter(past_end, c, 8, "src"); }, ErrorCode::invalid_argument,
               {"src: layer 2 attn_v: layer 2 >= num_hidden_layers 2"});
  check_lora_adapter(a, c, 2, "src");  // rank == max_rank is allowed
  expect_error([&] { check_lora_adapter(a, c, 1, "src"); }, ErrorCode::invalid_argument,
               {"rank 2 is above lora_cache_max_adapter_size 1"});
  LoraAdapter zero = a;
  zero.weights[0].rank = 0;
  expect_error([&] { check_lora_adapter(zero, c, 8, "src"); }, ErrorCode::invalid_argument, {"rank 0 must be >= 1"});
  LoraAdapter bad_id = a;
  bad_id.weights[0].module = static_cast<LoraModule>(9);
  expect_error([&] { check_lora_adapter(bad_id, c, 8, "src"); }, ErrorCode::invalid_argument, {"module_id 9"});
  LoraAdapter gate = a;
  gate.weights[0].module = LoraModule::mlp_gate;
  expect_error([&] { check_lora_adapter(gate, tiny_gpt2(), 8, "src"); }, ErrorCode::invalid_argument,
               {"layer 1 mlp_gate: mlp_gate (up_proj)", "GPT2LMHeadModel"});
  CHECK(lora_module_dims(c, LoraModule::attn_qkv).out == 128 && lora_module_dims(c, LoraModule::attn_dense).in == 64);
  CHECK(lora_module_dims(c, LoraModule::mlp_4h_to_h).in == 160 && lora_module_dims(c, LoraModule::mlp_gate).out == 160);
  CHECK(std::string(lora_module_name(LoraModule::mlp_gate)) == "mlp_gate" &&
        std::string(lora_module_hf_name(LoraModule::mlp_gate)) == "up_proj");
  CHECK(is_lora_module_id(7) && !is_lora_module_id(8) && !is_lora_module_id(-1));
}

// ---- TensorRT-LLM rows ----

struct Rows {
  std::vector<float> weights;  // [rows, cols]
  std::vector<int32_t> config; // [rows, 3]
  int64_t rows = 0, cols = 0;
};

// hf_lora_convert.py's layout: A then B then padding (filled with a value that must never be read).
Rows to_rows(const std::vector<const LoraWeight*>& ws, int64_t pad) {
  Rows r;
  for (const LoraWeight* w : ws) r.cols = std::max<int64_t>(r.cols, int64_t(w->a.size() + w->b.size()));
  r.cols += pad;
  for (const LoraWeight* w : ws) {
    std::vector<float> row(size_t(r.cols), 1234.5f);
    std::copy(w->a.begin(), w->a.end(), row.begin());
    std::copy(w->b.begin(), w->b.end(), row.begin() + int64_t(w->a.size()));
    r.weights.insert(r.weights.end(), row.begin(), row.end());
    r.config.insert(r.config.end(), {static_cast<int32_t>(w->module), w->layer, w->rank});
    ++r.rows;
  }
  return r;
}

bool same_weight(const LoraWeight* x, const LoraWeight* y) {
  return x && y && x->layer == y->layer && x->module == y->module && x->rank == y->rank && x->in == y->in &&
         x->out == y->out && x->a == y->a && x->b == y->b;
}

// (3) lora_from_tensors on rows equals the PEFT-loaded adapter; its refusals name the row.
void trt_rows() {
  const ModelConfig c = tiny_llama();
  std::vector<PeftTensor> ts;
  for (int32_t l = 0; l < 2; ++l) {
    add_pair(ts, l, "self_attn.q_proj", 4, 64, 64);
    add_pair(ts, l, "self_attn.v_proj", 2, 64, 32);
    add_pair(ts, l, "mlp.down_proj", 4, 160, 64);
  }
  add_pair(ts, 0, "mlp.gate_up_proj", 3, 64, 320);
  add_pair(ts, 1, "self_attn.qkv_proj", 4, 64, 128);
  const std::string cfg = R"({"r": 4, "lora_alpha": 8, "rank_pattern": {"v_proj": 2, "gate_up_proj": 3}})";
  const LoraAdapter peft = load_peft_adapter(write_peft(cfg, ts, DType::bf16), c, 8);
  CHECK(peft.weights.size() == 9);
  std::vector<const LoraWeight*> order;
  for (auto it = peft.weights.rbegin(); it != peft.weights.rend(); ++it) order.push_back(&*it);  // any row order
  const Rows r = to_rows(order, 7);
  const LoraAdapter trt = lora_from_tensors(c, 8, r.weights.data(), r.rows, r.cols, r.config.data(), r.rows, 3);
  CHECK(trt.weights.size() == peft.weights.size());
  for (const LoraWeight& w : peft.weights)
    CHECK_MSG(same_weight(find_weight(trt, w.layer, w.module), &w), "layer %d %s", w.layer, lora_module_name(w.module));

  auto from = [&](const Rows& x, int64_t config_rows, int64_t config_cols, const ModelConfig& cfg = tiny_llama()) {
    return [x, config_rows, config_cols, cfg] {
      lora_from_tensors(cfg, 8, x.weights.data(), x.rows, x.cols, x.config.data(), config_rows, config_cols);
    };
  };
  expect_error(from(r, r.rows, 4), ErrorCode::invalid_argument, {"lora_config must be [rows, 3]", "got 4 columns"});
  expect_error(from(r, r.rows - 1, 3), ErrorCode::invalid_argument,
               {"lora_weights has 9 rows but lora_config has 8"});
  Rows bad = r;
  bad.config[1 * 3] = 9;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 1: module_id 9 (cross_attn_q)"});
  bad.config[1 * 3] = 16;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 1: module_id 16 (moe_router)"});
  bad.config[1 * 3] = 42;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 1: module_id 42 is not"});
  bad = r;
  bad.config[2 * 3 + 1] = 5;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 2: layer 5 >= num_hidden_layers 2"});
  bad = r;
  bad.config[3 * 3 + 2] = 0;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 3: adapter_size 0 must be >= 1"});
  bad.config[3 * 3 + 2] = 9;
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument,
               {"lora_config row 3:", "rank 9 is above lora_cache_max_adapter_size 8"});
  bad = r;
  bad.config[4 * 3] = bad.config[5 * 3];
  bad.config[4 * 3 + 1] = bad.config[5 * 3 + 1];
  expect_error(from(bad, bad.rows, 3), ErrorCode::invalid_argument, {"lora_config row 5:", "already given by row 4"});

  // A row too short for its module: one attn_q of rank 4 needs 4 x (64 + 64) values
  LoraWeight q = *find_weight(peft, 0, LoraModule::attn_q);
  Rows shortrow = to_rows({&q}, 0);
  shortrow.cols = 511;
  expect_error(from(shortrow, 1, 3), ErrorCode::invalid_argument,
               {"lora_weights row 0 has 511 values but attn_q of rank 4 needs 4 x (64 + 64) = 512"});
  // A batch-less single row with no padding at all is exactly long enough
  Rows exact = to_rows({&q}, 0);
  CHECK(exact.cols == 512);
  const LoraAdapter one = lora_from_tensors(c, 8, exact.weights.data(), 1, 512, exact.config.data(), 1, 3);
  CHECK(one.weights.size() == 1 && same_weight(&one.weights[0], &q));
  Rows nan = exact;
  nan.weights[70] = INFINITY;
  expect_error(from(nan, 1, 3), ErrorCode::invalid_argument, {"lora_weights: layer 0 attn_q: A[70] is"});
  // mlp_gate on a model whose MLP is not gated; an MLP module on a mixture-of-experts layer
  LoraWeight up = *find_weight(peft, 0, LoraModule::mlp_gate);
  expect_error(from(to_rows({&up}, 0), 1, 3, tiny_gpt2()), ErrorCode::invalid_argument,
               {"lora_config row 0: module_id 7 (mlp_gate)", "not gated"});
  LoraWeight down = *find_weight(peft, 1, LoraModule::mlp_4h_to_h);
  expect_error(from(to_rows({&down}, 3), 1, 3, tiny_moe()), ErrorCode::invalid_argument,
               {"lora_weights: layer 1 mlp_4h_to_h: layer 1 is a mixture-of-experts layer"});
  CHECK(lora_from_tensors(c, 8, nullptr, 0, 0, nullptr, 0, 3).weights.empty());
}

// ---- a rank's slice ----

// Every module the model has on every layer, ranks 1..4, values small enough that float sums stay well inside 1e-5.
LoraAdapter every_module(const ModelConfig& c) {
  LoraAdapter a;
  Rng rng(99);
  for (int32_t l = 0; l < c.num_layers; ++l)
    for (int32_t id = 0; id < kLoraModuleCount; ++id) {
      LoraWeight w;
      w.layer = l;
      w.module = static_cast<LoraModule>(id);
      w.rank = 1 + (id + l) % 4;
      if (w.module == LoraModule::mlp_gate && c.architecture != Architecture::llama) continue;  // not gated
      const LoraModuleDims d = lora_module_dims(c, w.module);
      w.in = d.in;
      w.out = d.out;
      w.a = rng.values(w.rank * w.in, 0.2f);
      w.b = rng.values(w.out * w.rank);
      a.weights.push_back(std::move(w));
    }
  return a;
}

// y[off + o] += sum_r B[o, r] (sum_i A[r, i] x[i]), in float as an engine computes it.
void apply(const LoraSegment& s, const float* x, std::vector<float>& y) {
  std::vector<float> t(size_t(s.rank), 0.f);
  for (int32_t r = 0; r < s.rank; ++r)
    for (int64_t i = 0; i < s.in; ++i) t[size_t(r)] += s.a[size_t(r * s.in + i)] * x[i];
  for (int64_t o = 0; o < s.out; ++o)
    for (int32_t r = 0; r < s.rank; ++r) y[size_t(s.out_offset + o)] += s.b[size_t(o * s.rank + r)] * t[size_t(r)];
}

// The whole model's delta on each fused projection, in double, straight from the adapter.
struct Whole {
  std::vector<double> qkv, o, up, down;
};
Whole whole_delta(const LoraAdapter& a, const ModelConfig& c, int32_t layer, const std::vector<float>& x_hidden,
                  const std::vector<float>& x_q, const std::vector<float>& x_inter) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  Whole d{std::vector<double>(size_t(q + 2 * kv)), std::vector<double>(size_t(c.hidden_size)),
          std::vector<double>(size_t(2 * inter)), std::vector<double>(size_t(c.hidden_size))};
  for (const LoraWeight& w : a.weights) {
    if (w.layer != layer) continue;
    std::vector<double>* y = nullptr;
    const float* x = x_hidden.data();
    int64_t off = 0;
    switch (w.module) {
      case LoraModule::attn_qkv: y = &d.qkv; break;
      case LoraModule::attn_q: y = &d.qkv; break;
      case LoraModule::attn_k: y = &d.qkv; off = q; break;
      case LoraModule::attn_v: y = &d.qkv; off = q + kv; break;
      case LoraModule::attn_dense: y = &d.o; x = x_q.data(); break;
      case LoraModule::mlp_h_to_4h: y = &d.up; break;
      case LoraModule::mlp_gate: y = &d.up; off = inter; break;
      case LoraModule::mlp_4h_to_h: y = &d.down; x = x_inter.data(); break;
    }
    for (int64_t o = 0; o < w.out; ++o) {
      double sum = 0;
      for (int32_t r = 0; r < w.rank; ++r) {
        double t = 0;
        for (int64_t i = 0; i < w.in; ++i) t += double(w.a[size_t(r * w.in + i)]) * x[i];
        sum += double(w.b[size_t(o * w.rank + r)]) * t;
      }
      (*y)[size_t(off + o)] += sum;
    }
  }
  return d;
}

// (4) At tp x pp, each rank's column-parallel rows are the whole delta's rows of its heads / columns (and together
// cover every row), and its row-parallel partial results add up to the whole delta.
void localize_grid(const ModelConfig& c, int32_t tp, int32_t pp) {
  const LoraAdapter a = every_module(c);
  check_lora_adapter(a, c, 4, "every_module");
  const int64_t hd = c.head_dim, q = c.num_heads * hd, kv = c.num_kv_heads * hd, inter = c.intermediate_size;
  Rng rng(uint64_t(7 + tp * 10 + pp));
  std::vector<int32_t> layer_seen(size_t(c.num_layers), 0);
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const std::vector<float> xh = rng.values(c.hidden_size), xq = rng.values(q), xi = rng.values(inter);
    const Whole whole = whole_delta(a, c, layer, xh, xq, xi);
    std::vector<uint8_t> qkv_seen(whole.qkv.size()), up_seen(whole.up.size());
    std::vector<double> o_sum(whole.o.size()), down_sum(whole.down.size());
    double worst = 0;
    bool shapes_ok = true;
    int32_t stages_holding = 0;
    for (int32_t pr = 0; pr < pp; ++pr)
      for (int32_t tr = 0; tr < tp; ++tr) {
        ShardInfo shard;
        shard.tp_rank = tr;
        shard.tp_size = tp;
        shard.pp_rank = pr;
        shard.pp_size = pp;
        const ParallelLayout l = make_parallel_layout(c, shard);
        if (tp > c.num_kv_heads) CHECK(l.kv_replicated);
        const LoraLocal local = localize_lora(a, c, l);
        shapes_ok = shapes_ok && local.layers.size() == size_t(l.local_layers());
        if (layer < l.layer_begin || layer >= l.layer_end) continue;
        if (tr == 0) ++stages_holding;
        const auto& targets = local.layers[size_t(layer - l.layer_begin)];
        const int64_t lq = l.local_heads() * hd, lkv = l.local_kv_heads() * hd, li = l.local_inter();
        auto run = [&](LoraTarget t, const float* x, int64_t in, int64_t width) {
          std::vector<float> y(size_t(width), 0.f);
          for (const LoraSegment& s : targets[size_t(t)]) {
            shapes_ok = shapes_ok && s.in == in && s.out_offset >= 0 && s.out_offset + s.out <= width &&
                        s.a.size() == size_t(s.rank * s.in) && s.b.size() == size_t(s.out * s.rank);
            if (shapes_ok) apply(s, x, y);
          }
          return y;
        };
        const std::vector<float> y_qkv = run(LoraTarget::qkv, xh.data(), c.hidden_size, lq + 2 * lkv);
        const std::vector<float> y_up = run(LoraTarget::up, xh.data(), c.hidden_size, 2 * li);
        const std::vector<float> y_o = run(LoraTarget::o, xq.data() + l.head_begin * hd, lq, c.hidden_size);
        const std::vector<float> y_down = run(LoraTarget::down, xi.data() + l.inter_begin, li, c.hidden_size);
        for (int64_t j = 0; j < lq + 2 * lkv; ++j) {
          const int64_t g = j < lq             ? l.head_begin * hd + j
                            : j < lq + lkv     ? q + l.kv_head_begin * hd + (j - lq)
                                               : q + kv + l.kv_head_begin * hd + (j - lq - lkv);
          worst = std::max(worst, std::fabs(y_qkv[size_t(j)] - whole.qkv[size_t(g)]));
          qkv_seen[size_t(g)] = 1;
        }
        for (int64_t j = 0; j < 2 * li; ++j) {
          const int64_t g = j < li ? l.inter_begin + j : inter + l.inter_begin + (j - li);
          worst = std::max(worst, std::fabs(y_up[size_t(j)] - whole.up[size_t(g)]));
          up_seen[size_t(g)] = 1;
        }
        for (size_t j = 0; j < o_sum.size(); ++j) {
          o_sum[j] += y_o[j];
          down_sum[j] += y_down[j];
        }
      }
    for (size_t j = 0; j < o_sum.size(); ++j)
      worst = std::max({worst, std::fabs(o_sum[j] - whole.o[j]), std::fabs(down_sum[j] - whole.down[j])});
    CHECK_MSG(shapes_ok, "tp %d pp %d layer %d: segment shapes", tp, pp, layer);
    CHECK_MSG(worst < 1e-5, "tp %d pp %d layer %d: max |rank deltas - whole| = %g", tp, pp, layer, worst);
    CHECK_MSG(stages_holding == 1, "tp %d pp %d layer %d held by %d stages", tp, pp, layer, stages_holding);
    bool covered = true;
    for (uint8_t s : qkv_seen) covered = covered && s;
    for (uint8_t s : up_seen) covered = covered && s;
    CHECK_MSG(covered, "tp %d pp %d layer %d: some qkv / up row on no rank", tp, pp, layer);
    // The delta is not trivially zero, so the comparisons above could fail.
    double norm = 0;
    for (double v : whole.qkv) norm += std::fabs(v);
    for (double v : whole.down) norm += std::fabs(v);
    CHECK(norm > 1.0);
  }
}

void localize() {
  const ModelConfig c = tiny_llama();
  for (auto [tp, pp] : std::vector<std::pair<int32_t, int32_t>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}})
    localize_grid(c, tp, pp);
  localize_grid(tiny_gpt2(), 2, 1);  // a plain MLP: up holds only mlp_h_to_4h's rows

  // A rank's pieces, by hand: tp 2 rank 1 holds q heads 2..3, kv head 1, intermediate columns 80..159.
  LoraAdapter a = every_module(c);
  ShardInfo shard;
  shard.tp_rank = 1;
  shard.tp_size = 2;
  const ParallelLayout l = make_parallel_layout(c, shard);
  const LoraLocal local = localize_lora(a, c, l);
  const auto& t0 = local.layers[0];
  CHECK(t0[size_t(LoraTarget::qkv)].size() == 6);  // attn_qkv's three + q, k, v
  std::vector<int64_t> offsets;
  for (const LoraSegment& s : t0[size_t(LoraTarget::qkv)]) offsets.push_back(s.out_offset);
  CHECK((offsets == std::vector<int64_t>{0, 0, 32, 32, 48, 48}));
  const LoraWeight* v = find_weight(a, 0, LoraModule::attn_v);
  const LoraSegment& v_seg = t0[size_t(LoraTarget::qkv)][5];  // by offset, attn_qkv's v segment comes first
  CHECK(v_seg.out == 16 && v_seg.a == v->a &&
        std::equal(v_seg.b.begin(), v_seg.b.end(), v->b.begin() + 16 * v->rank));
  const LoraSegment& up = t0[size_t(LoraTarget::up)].back();
  CHECK(up.out_offset == 80 && up.out == 80);
  const LoraSegment& down = t0[size_t(LoraTarget::down)][0];
  const LoraWeight* dw = find_weight(a, 0, LoraModule::mlp_4h_to_h);
  CHECK(down.in == 80 && down.out == 64 && down.b == dw->b && down.a[0] == dw->a[80] &&
        down.a[size_t(down.in)] == dw->a[size_t(dw->in + 80)]);
  // Only the stage's layers, renumbered; untouched projections have no segments.
  LoraAdapter only_l1;
  only_l1.weights.push_back(*find_weight(a, 1, LoraModule::attn_q));
  shard = ShardInfo{};
  shard.pp_size = 2;
  shard.pp_rank = 1;
  const LoraLocal stage1 = localize_lora(only_l1, c, make_parallel_layout(c, shard));
  CHECK(stage1.layers.size() == 1 && stage1.layers[0][size_t(LoraTarget::qkv)].size() == 1 &&
        stage1.layers[0][size_t(LoraTarget::o)].empty() && stage1.bytes() == only_l1.bytes());
  shard.pp_rank = 0;
  CHECK(localize_lora(only_l1, c, make_parallel_layout(c, shard)).bytes() == 0);
}

}  // namespace

TEST_MAIN(peft_values(); peft_fused_and_gpt2(); peft_refusals(); check_refusals(); trt_rows(); localize())
