// config.json / generation_config.json parsing: architectures, defaults, rope_scaling variants and errors.
#include <cmath>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "check.h"
#include "errors.h"
#include "model/model-config.h"
#include "temp-dir.h"

using namespace engine;

static std::string make_dir(const std::string& config, const std::string& generation = "") {
  const std::string dir = test::make_temp_dir("model-config");
  std::ofstream(dir + "/config.json") << config;
  if (!generation.empty()) std::ofstream(dir + "/generation_config.json") << generation;
  return dir;
}

static std::string llama(const std::string& extra) {
  return R"({"architectures":["LlamaForCausalLM"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
         R"("num_attention_heads":4,"intermediate_size":128)" + extra + "}";
}

static void llama_defaults_and_fields() {
  ModelConfig c = load_model_config(make_dir(llama("")));
  CHECK(c.architecture == Architecture::llama);
  CHECK(c.architecture_name == "LlamaForCausalLM");
  CHECK(c.num_kv_heads == 4 && c.head_dim == 16 && c.rope_scaling.type == "default");
  CHECK(!c.attention_bias && !c.attention_out_bias && !c.mlp_bias && !c.tie_word_embeddings);
  CHECK(c.eos_token_ids.empty() && c.bos_token_id == -1);

  c = load_model_config(make_dir(llama(R"(,"num_key_value_heads":2,"head_dim":32,"rms_norm_eps":1e-5,)"
                                       R"("rope_theta":500000.0,"attention_bias":true,"mlp_bias":true,)"
                                       R"("tie_word_embeddings":true,"eos_token_id":[1,2],"bos_token_id":0,)"
                                       R"("rope_scaling":null)")));
  CHECK(c.num_kv_heads == 2 && c.head_dim == 32 && c.norm_eps == 1e-5f && c.rope_theta == 500000.0f);
  CHECK(c.attention_bias && c.attention_out_bias && c.mlp_bias && c.tie_word_embeddings);
  CHECK(c.eos_token_ids == std::vector<int32_t>({1, 2}) && c.bos_token_id == 0);
  CHECK(c.rope_scaling.type == "default");

  // generation_config.json overrides config.json's ids
  c = load_model_config(make_dir(llama(R"(,"eos_token_id":2)"), R"({"eos_token_id":[5,6],"pad_token_id":9})"));
  CHECK(c.eos_token_ids == std::vector<int32_t>({5, 6}) && c.pad_token_id == 9);
  c = load_model_config(make_dir(llama(R"(,"eos_token_id":2)"), R"({"eos_token_id":7})"));
  CHECK(c.eos_token_ids == std::vector<int32_t>({7}));

  std::string qwen = llama(R"(,"attention_bias":false)");
  qwen.replace(qwen.find("LlamaForCausalLM"), 16, "Qwen2ForCausalLM");
  c = load_model_config(make_dir(qwen));
  CHECK(c.architecture == Architecture::llama && c.attention_bias && !c.attention_out_bias);
  std::string mistral = llama("");
  mistral.replace(mistral.find("LlamaForCausalLM"), 16, "MistralForCausalLM");
  CHECK(load_model_config(make_dir(mistral)).architecture == Architecture::llama);
}

static void rope_scaling() {
  ModelConfig c = load_model_config(make_dir(llama(
      R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,)"
      R"("original_max_position_embeddings":16})")));
  CHECK(c.rope_scaling.type == "llama3" && c.rope_scaling.factor == 8.0f &&
        c.rope_scaling.original_max_position_embeddings == 16 && c.rope_scaling.high_freq_factor == 4.0f);
  c = load_model_config(make_dir(llama(R"(,"rope_scaling":{"type":"linear","factor":2.0})")));
  CHECK(c.rope_scaling.type == "linear" && c.rope_scaling.factor == 2.0f);
  c = load_model_config(make_dir(llama(R"(,"rope_scaling":{"rope_type":"default"})")));
  CHECK(c.rope_scaling.type == "default" && c.rope_scaling.factor == 1.0f);
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"rope_scaling":{"rope_type":"yarn","factor":4.0})"))),
               "rope_scaling type 'yarn' is not supported");
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"rope_scaling":{"type":"dynamic","factor":4.0})"))),
               "rope_scaling type 'dynamic' is not supported");
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"rope_scaling":{"type":"linear"})"))), "lacks 'factor'");
  // transformers 5.x: rope_parameters carries rope_theta and the scaling
  c = load_model_config(make_dir(llama(
      R"(,"rope_parameters":{"rope_type":"llama3","rope_theta":500000.0,"factor":32.0,"low_freq_factor":1.0,)"
      R"("high_freq_factor":4.0,"original_max_position_embeddings":8192})")));
  CHECK(c.rope_scaling.type == "llama3" && c.rope_scaling.factor == 32.0f && c.rope_theta == 500000.0f);
  c = load_model_config(make_dir(llama(R"(,"rope_parameters":{"rope_type":"default","rope_theta":1000.0})")));
  CHECK(c.rope_scaling.type == "default" && c.rope_theta == 1000.0f);
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"rope_parameters":{"rope_type":"yarn","factor":4.0})"))),
               "rope_parameters type 'yarn' is not supported");
}

static void gpt2() {
  ModelConfig c = load_model_config(make_dir(
      R"({"architectures":["GPT2LMHeadModel"],"vocab_size":50,"n_embd":32,"n_layer":2,"n_head":4,)"
      R"("n_positions":64,"n_inner":null,"layer_norm_epsilon":1e-5,"activation_function":"gelu_new",)"
      R"("eos_token_id":49})"));
  CHECK(c.architecture == Architecture::gpt2 && c.hidden_size == 32 && c.num_layers == 2 && c.num_heads == 4);
  CHECK(c.num_kv_heads == 4 && c.head_dim == 8 && c.intermediate_size == 128 && c.max_position_embeddings == 64);
  CHECK(c.tie_word_embeddings && c.hidden_act == "gelu_new" && c.eos_token_ids == std::vector<int32_t>({49}));
}

static void errors() {
  try {
    load_model_config(make_dir(R"({"architectures":["FooForCausalLM"]})"));
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(std::string(e.what()) ==
          "architecture 'FooForCausalLM' in config.json is not supported; supported: LlamaForCausalLM, "
          "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, GemmaForCausalLM, "
          "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM, Gemma2ForCausalLM, GPT2LMHeadModel");
  }
  try {
    load_model_config("/nonexistent/ckpt");
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(e.code() == ErrorCode::not_found);
    CHECK(std::string(e.what()).find("/nonexistent/ckpt/config.json") != std::string::npos);
  }
  std::string no_hidden = llama("");
  no_hidden.replace(no_hidden.find("\"hidden_size\":64,"), 17, "");
  try {
    load_model_config(make_dir(no_hidden));
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(e.code() == ErrorCode::bad_checkpoint);
    CHECK(std::string(e.what()).find("lacks required field 'hidden_size'") != std::string::npos);
  }
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"num_key_value_heads":3)"))), "not a multiple");
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"hidden_act":"mish")"))), "activation 'mish' is not supported");
  CHECK_THROWS(load_model_config(make_dir(llama(R"(,"num_key_value_heads":"two")"))),
               "field 'num_key_value_heads' must be an integer, got a string");
  CHECK_THROWS(load_model_config(make_dir("{\"architectures\": [")), "invalid JSON at byte");
}

// Qwen3: q/k norms on, head_dim as written; sliding windows only with use_sliding_window, on the layers
// layer_types (or max_window_layers) name.
static void qwen3() {
  auto qwen3 = [](const std::string& extra) {
    return R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
           R"("num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"intermediate_size":128,)"
           R"("rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"})" + extra + "}";
  };
  ModelConfig c = load_model_config(make_dir(qwen3(R"(,"use_sliding_window":false,"layer_types":["full_attention","full_attention"])")));
  CHECK(c.qk_norm && c.head_dim == 32 && !c.attention_bias && c.rope_theta == 1000000.0f);
  CHECK(!load_model_config(make_dir(llama(""))).qk_norm);
  CHECK(c.layer_window == std::vector<int32_t>({0, 0}) && c.sliding_window == 0);
  c = load_model_config(make_dir(qwen3(R"(,"use_sliding_window":true,"sliding_window":64,"max_window_layers":1)")));
  CHECK(c.sliding_window == 64 && c.layer_window == std::vector<int32_t>({0, 64}));
  // use_sliding_window false: no window, whatever layer_types says (transformers reads them so too).
  c = load_model_config(make_dir(qwen3(R"(,"sliding_window":64,"layer_types":["full_attention","sliding_attention"])")));
  CHECK(c.layer_window == std::vector<int32_t>({0, 0}));
  c = load_model_config(make_dir(qwen3(R"(,"use_sliding_window":true,"sliding_window":64,)"
                                       R"("layer_types":["sliding_attention","full_attention"])")));
  CHECK(c.layer_window == std::vector<int32_t>({64, 0}));
  CHECK_THROWS(load_model_config(make_dir(qwen3(R"(,"layer_types":["full_attention","chunked_attention"])"))),
               "layer_types entry \"chunked_attention\" is not supported; supported: full_attention, sliding_attention");
  CHECK_THROWS(load_model_config(make_dir(qwen3(R"(,"layer_types":["full_attention"])"))),
               "field 'layer_types' has 1 entries for 2 layers (num_hidden_layers)");
  c = load_model_config(make_dir(R"({"model_type":"qwen3","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
                                 R"("num_attention_heads":4,"intermediate_size":128})"));
  CHECK(c.architecture_name == "Qwen3ForCausalLM" && c.qk_norm);
}

// The mixture-of-experts families: experts, top-k, which layers are sparse, the shared expert; bad values named.
static void moe() {
  auto qwen_moe = [](const char* arch, const std::string& extra) {
    return std::string(R"({"architectures":[")") + arch + R"("],"vocab_size":100,"hidden_size":64,"num_hidden_layers":4,)"
           R"("num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"moe_intermediate_size":32,)"
           R"("num_experts_per_tok":2)" + extra + "}";
  };
  ModelConfig c = load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM",
      R"(,"num_experts":8,"norm_topk_prob":true,"decoder_sparse_step":2,"mlp_only_layers":[3])")));
  CHECK(c.moe.enabled() && c.moe.num_experts == 8 && c.moe.top_k == 2 && c.moe.expert_inter == 32);
  CHECK(c.moe.norm_topk_prob && c.moe.shared_inter == 0 && c.qk_norm && c.moe.names == MoeConfig::Names::qwen);
  // (i + 1) % 2 == 0 and not in mlp_only_layers: layer 1 only (3 is listed as dense).
  CHECK(!c.moe.sparse_layer(0) && c.moe.sparse_layer(1) && !c.moe.sparse_layer(2) && !c.moe.sparse_layer(3));
  // transformers 5 writes Qwen3-MoE's expert count as num_local_experts.
  CHECK(load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM", R"(,"num_local_experts":6)"))).moe.num_experts == 6);
  c = load_model_config(make_dir(qwen_moe("Qwen2MoeForCausalLM", R"(,"num_experts":4,"shared_expert_intermediate_size":96)")));
  CHECK(c.moe.shared_inter == 96 && !c.moe.norm_topk_prob && c.attention_bias && !c.attention_out_bias && !c.qk_norm);
  CHECK_THROWS(load_model_config(make_dir(qwen_moe("Qwen2MoeForCausalLM", R"(,"num_experts":4)"))),
               "lacks required field 'shared_expert_intermediate_size'");
  c = load_model_config(make_dir(R"({"architectures":["MixtralForCausalLM"],"vocab_size":100,"hidden_size":64,)"
                                 R"("num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":96,)"
                                 R"("num_local_experts":4,"num_experts_per_tok":2,"sliding_window":null})"));
  CHECK(c.moe.names == MoeConfig::Names::mixtral && c.moe.expert_inter == 96 && c.moe.norm_topk_prob);
  CHECK(c.moe.sparse_layer(0) && c.moe.sparse_layer(1) && c.sliding_window == 0);
  CHECK(!load_model_config(make_dir(llama(""))).moe.enabled());
  CHECK_THROWS(load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM", R"(,"num_experts":8,"mlp_only_layers":[4])"))),
               "field 'mlp_only_layers' names layer 4 of a model with 4 (num_hidden_layers)");
  CHECK_THROWS(load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM", R"(,"num_experts":1)"))),
               "num_experts_per_tok (2) exceeds the number of experts (1)");
  CHECK_THROWS(load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM", ""))), "lacks required field 'num_experts'");
  CHECK_THROWS(load_model_config(make_dir(qwen_moe("Qwen3MoeForCausalLM", R"(,"num_experts":0)"))),
               "field 'num_experts' must be a positive integer, got 0");
}

// Phi-3: fused weights; Mistral's and Phi-3's sliding window caps the sequence length; partial rotary refused.
static void phi3_and_windows() {
  auto cfg = [](const std::string& arch, const std::string& extra) {
    return R"({"architectures":[")" + arch + R"("],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
           R"("num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"max_position_embeddings":4096)" +
           extra + "}";
  };
  ModelConfig c = load_model_config(make_dir(cfg("Phi3ForCausalLM", R"(,"sliding_window":2047)")));
  CHECK(c.fused_qkv && c.fused_gate_up && c.sliding_window == 2047 && c.max_position_embeddings == 4096);
  CHECK(c.layer_window == std::vector<int32_t>({2047, 2047}) && kv_release_window(c, 0) == 2047);
  c = load_model_config(make_dir(cfg("Phi3ForCausalLM", R"(,"sliding_window":null)")));
  CHECK(c.sliding_window == 0 && c.layer_window == std::vector<int32_t>({0, 0}) && kv_release_window(c, 0) == 0);
  c = load_model_config(make_dir(cfg("MistralForCausalLM", R"(,"sliding_window":1024)")));
  CHECK(!c.fused_qkv && c.window_of(0) == 1024 && c.window_of(1) == 1024 && c.max_position_embeddings == 4096);
  // A per-request cap narrows every layer; a wider one leaves the model's windows.
  CHECK(kv_release_window(c, 100) == 100 && kv_release_window(c, 5000) == 1024);
  c = load_model_config(make_dir(cfg("LlamaForCausalLM", R"(,"sliding_window":1024)")));
  CHECK(c.window_of(0) == 0 && c.window_of(1) == 0);  // Llama has no sliding window, whatever a config says
  CHECK(kv_release_window(c, 0) == 0 && kv_release_window(c, 256) == 256);
  CHECK_THROWS(load_model_config(make_dir(cfg("MistralForCausalLM", R"(,"sliding_window":0)"))),
               "sliding_window must be a positive integer or null, got 0");
  c = load_model_config(make_dir(cfg("Qwen2ForCausalLM", R"(,"use_sliding_window":true,"sliding_window":64,)"
                                                         R"("max_window_layers":1)")));
  CHECK(c.layer_window == std::vector<int32_t>({0, 64}) && kv_release_window(c, 0) == 0);
  CHECK(load_model_config(make_dir(cfg("Qwen2ForCausalLM", R"(,"use_sliding_window":false,"sliding_window":64)")))
            .window_of(1) == 0);
  CHECK_THROWS(load_model_config(make_dir(cfg("Phi3ForCausalLM", R"(,"attention_bias":true)"))),
               "attention_bias / mlp_bias true is not supported for Phi3ForCausalLM");
  CHECK_THROWS(load_model_config(make_dir(cfg("Phi3ForCausalLM", R"(,"partial_rotary_factor":0.75)"))),
               "partial_rotary_factor 0.75 is not supported");
  CHECK_THROWS(load_model_config(make_dir(cfg("LlamaForCausalLM", R"(,"rope_parameters":{"rope_type":"default","partial_rotary_factor":0.5})"))),
               "rope_parameters.partial_rotary_factor 0.5 is not supported");
  CHECK(load_model_config(make_dir(cfg("Phi3ForCausalLM", R"(,"rope_parameters":{"rope_type":"default","partial_rotary_factor":1.0})")))
            .fused_qkv);
  c = load_model_config(make_dir(R"({"model_type":"phi3","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
                                 R"("num_attention_heads":4,"intermediate_size":128})"));
  CHECK(c.architecture_name == "Phi3ForCausalLM" && c.fused_gate_up);
}

// Gemma: embeddings times sqrt(hidden), (1 + w) norms, hidden_activation (tanh GELU when absent) over hidden_act,
// tied by default.
static void gemma() {
  ModelConfig c = load_model_config(make_dir(
      R"({"architectures":["GemmaForCausalLM"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":1,"head_dim":32,"intermediate_size":128,"hidden_act":"gelu"})"));
  CHECK(c.embed_scale == 8.0f && c.norm_plus_one && c.hidden_act == "gelu_pytorch_tanh" && c.tie_word_embeddings &&
        c.head_dim == 32 && c.num_kv_heads == 1);
  c = load_model_config(make_dir(R"({"model_type":"gemma","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
                                 R"("num_attention_heads":4,"intermediate_size":128,"hidden_activation":"gelu"})"));
  CHECK(c.architecture_name == "GemmaForCausalLM" && c.hidden_act == "gelu");
  CHECK(load_model_config(make_dir(llama(""))).embed_scale == 1.0f);
}

// Gemma 2: Gemma's fields plus the query scale, both soft-caps, sandwich norms and alternating windows.
static void gemma2() {
  auto cfg = [](const std::string& extra) {
    return R"({"architectures":["Gemma2ForCausalLM"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":4,)"
           R"("num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"intermediate_size":128)" + extra + "}";
  };
  ModelConfig c = load_model_config(make_dir(cfg(R"(,"sliding_window":16,"query_pre_attn_scalar":24,)"
                                                 R"("attn_logit_softcapping":50.0,"final_logit_softcapping":30.0)")));
  CHECK(c.embed_scale == 8.0f && c.norm_plus_one && c.sandwich_norms && c.hidden_act == "gelu_pytorch_tanh");
  CHECK(std::fabs(c.query_scale - 1.0f / std::sqrt(24.0f)) < 1e-7f && c.attn_softcap == 50.0f && c.final_softcap == 30.0f);
  // Local layers first, alternating (transformers' default layer_types).
  CHECK(c.layer_window == std::vector<int32_t>({16, 0, 16, 0}) && kv_release_window(c, 0) == 0);
  CHECK(kv_release_window(c, 8) == 8 && kv_release_window(c, 32) == 32);
  c = load_model_config(make_dir(cfg(R"(,"sliding_window":16,"attn_logit_softcapping":null,"final_logit_softcapping":null)")));
  CHECK(c.attn_softcap == 0 && c.final_softcap == 0 && std::fabs(c.query_scale - 1.0f / std::sqrt(32.0f)) < 1e-7f);
  CHECK_THROWS(load_model_config(make_dir(cfg(""))), "lacks 'sliding_window' (Gemma 2's local layers need it)");
  CHECK_THROWS(load_model_config(make_dir(cfg(R"(,"sliding_window":16,"attn_logit_softcapping":-1)"))),
               "field 'attn_logit_softcapping' must be > 0 or null, got -1");
  CHECK_THROWS(load_model_config(make_dir(cfg(R"(,"sliding_window":16,"query_pre_attn_scalar":0)"))),
               "field 'query_pre_attn_scalar' must be > 0");
  c = load_model_config(make_dir(R"({"model_type":"gemma2","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
                                 R"("num_attention_heads":4,"intermediate_size":128,"sliding_window":8})"));
  CHECK(c.architecture_name == "Gemma2ForCausalLM" && c.layer_window == std::vector<int32_t>({8, 0}));
}

// Phi-3's longrope: both factor lists, the threshold from the top level or the rope parameters, the attention
// factor derived from the context ratio; bad lists named.
static void longrope() {
  auto cfg = [](const std::string& rope, const std::string& extra) {
    return R"({"architectures":["Phi3ForCausalLM"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,)"
           R"("num_attention_heads":4,"intermediate_size":128,"max_position_embeddings":256)" + extra +
           R"(,"rope_scaling":{"type":"longrope",)" + rope + "}}";
  };
  const std::string factors = R"("short_factor":[1,1.5,2,1,1,1,1,1],"long_factor":[2,3,4,5,6,7,8,9])";
  ModelConfig c = load_model_config(make_dir(cfg(factors, R"(,"original_max_position_embeddings":32)")));
  CHECK(c.rope_scaling.longrope() && c.rope_scaling.original_max_position_embeddings == 32);
  CHECK(c.rope_scaling.short_factor.size() == 8 && c.rope_scaling.short_factor[2] == 2.0f &&
        c.rope_scaling.long_factor[7] == 9.0f);
  CHECK(std::fabs(c.rope_scaling.attention_factor - std::sqrt(1.0 + std::log(8.0) / std::log(32.0))) < 1e-6);
  c = load_model_config(make_dir(cfg(factors + R"(,"original_max_position_embeddings":128,"attention_factor":1.25)", "")));
  CHECK(c.rope_scaling.original_max_position_embeddings == 128 && c.rope_scaling.attention_factor == 1.25f);
  // "su": the name early Phi-3 configs use. No original length: the model's own, so the attention factor is 1.
  c = load_model_config(make_dir(R"({"architectures":["Phi3ForCausalLM"],"vocab_size":100,"hidden_size":64,)"
                                 R"("num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,)"
                                 R"("rope_scaling":{"type":"su",)" + factors + "}}"));
  CHECK(c.rope_scaling.longrope() && c.rope_scaling.attention_factor == 1.0f);
  CHECK_THROWS(load_model_config(make_dir(cfg(R"("short_factor":[1,1],"long_factor":[1,1])", ""))),
               "rope_scaling.short_factor has 2 entries; head_dim / 2 = 8");
  CHECK_THROWS(load_model_config(make_dir(cfg(R"("short_factor":[1,1,1,1,1,1,1,1])", ""))),
               "rope_scaling of type 'longrope' lacks 'long_factor'");
  CHECK_THROWS(load_model_config(make_dir(cfg(R"("short_factor":[1,1,1,1,1,1,1,0],"long_factor":[1,1,1,1,1,1,1,1])", ""))),
               "rope_scaling.short_factor entries must be > 0, got 0");
}

TEST_MAIN({
  llama_defaults_and_fields();
  gemma2();
  longrope();
  qwen3();
  moe();
  phi3_and_windows();
  gemma();
  rope_scaling();
  gpt2();
  errors();
})
