// What the engine needs to know about a checkpoint, read from config.json (+ generation_config.json).
// One struct for every supported architecture; fields that an architecture lacks keep their defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant-config.h"

namespace engine {

enum class Architecture { llama, gpt2 };

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3 | longrope
  float factor = 1.0f;
  float low_freq_factor = 1.0f;                    // llama3
  float high_freq_factor = 4.0f;                   // llama3
  int32_t original_max_position_embeddings = 8192; // llama3, longrope
  // longrope (Phi-3 128k, Phi-3.5): per-frequency divisors [head_dim / 2]; a sequence longer than
  // original_max_position_embeddings rotates by long_factor, a shorter one by short_factor (the choice is made per
  // sequence at each step, as transformers and TensorRT-LLM make it; cached keys keep theirs). cos and sin are
  // both scaled by attention_factor, which multiplies every attention score by its square.
  std::vector<float> short_factor, long_factor;
  float attention_factor = 1.0f;
  bool longrope() const { return type == "longrope"; }
};

// Mixture-of-experts MLPs (Qwen3-MoE, Qwen2-MoE, Mixtral): a router picks top_k of num_experts per token; the
// layer's output is the weighted sum of the chosen experts' gated MLPs (plus Qwen2-MoE's shared expert behind a
// sigmoid gate). Layers outside `sparse` keep a dense MLP of intermediate_size.
struct MoeConfig {
  enum class Names { qwen, mixtral };   // mlp.experts.N.{gate,up,down}_proj | block_sparse_moe.experts.N.w{1,3,2}
  Names names = Names::qwen;
  int32_t num_experts = 0;              // 0: a dense model
  int32_t top_k = 0;                    // num_experts_per_tok
  int32_t expert_inter = 0;             // each expert's intermediate size (moe_intermediate_size; Mixtral's intermediate_size)
  bool norm_topk_prob = false;          // renormalise the chosen experts' probabilities to sum to 1 (Mixtral: always)
  int32_t shared_inter = 0;             // Qwen2-MoE's shared expert (0: none), gated by sigmoid(shared_expert_gate . x)
  std::vector<bool> sparse;             // [num_layers]: layer i has experts (decoder_sparse_step, mlp_only_layers)
  bool enabled() const { return num_experts > 0; }
  bool sparse_layer(int32_t i) const { return enabled() && sparse[static_cast<size_t>(i)]; }
};

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::string architecture_name;        // as written in config.json ("LlamaForCausalLM", "GPT2LMHeadModel", ...)
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;             // == num_heads when absent (MHA); 1 for MQA
  int32_t head_dim = 0;                 // hidden_size / num_heads unless config says otherwise
  int32_t intermediate_size = 0;        // GPT-2: n_inner or 4 * hidden
  int32_t max_position_embeddings = 0;  // GPT-2: n_positions
  float norm_eps = 1e-5f;               // rms_norm_eps / layer_norm_epsilon
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;          // q/k/v (and o for llama's attention_bias) carry biases; Qwen2: q/k/v only
  bool attention_out_bias = false;      // o_proj bias
  bool mlp_bias = false;
  bool qk_norm = false;                 // Qwen3: RMSNorm over each query and key head (q_norm / k_norm) before rope
  // Phi-3 stores q/k/v as one qkv_proj [q; k; v] and gate/up as one gate_up_proj [gate; up].
  bool fused_qkv = false, fused_gate_up = false;
  // Sliding-window attention: a token attends to the last `sliding_window` positions (itself included) on the
  // layers whose layer_window is non-zero — every layer for Mistral / Mixtral / Phi-3, layers from
  // max_window_layers on for Qwen2 / Qwen3 with use_sliding_window, alternate layers for Gemma 2, or as
  // `layer_types` lists them. layer_window: [num_layers], 0 = full attention.
  int32_t sliding_window = 0;
  std::vector<int32_t> layer_window;
  int32_t window_of(int32_t layer) const {
    return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)];
  }
  // Attention scores are q.k * query_scale (0: 1 / sqrt(head_dim); Gemma 2: query_pre_attn_scalar^-0.5).
  float query_scale = 0.0f;
  // Gemma 2's soft-capping, cap * tanh(x / cap) (0: none): of the attention scores before the mask and softmax,
  // and of the final logits.
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  // Gemma 2's four norms per layer: the attention output and the MLP output are each normed before they join the
  // residual (post_attention_layernorm, post_feedforward_layernorm), the MLP input by pre_feedforward_layernorm.
  bool sandwich_norms = false;
  // Gemma: the embedding rows are multiplied by sqrt(hidden_size) on the way in (not on the tied LM head), and its
  // RMSNorms multiply by (1 + weight) — folded into the weights at load (norm_plus_one tells the loader to).
  float embed_scale = 1.0f;
  bool norm_plus_one = false;
  std::string hidden_act = "silu";      // silu | gelu_new | gelu | gelu_pytorch_tanh | relu
  std::string torch_dtype;              // informational
  MoeConfig moe;
  QuantConfig quant;                    // FP8 checkpoints: how their scales are stored (quant/quant-config.h)

  // generation_config.json / config.json token ids (-1 when absent)
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;   // generation_config may list several
  int32_t pad_token_id = -1;
};

// The window a layer of `layer_window` (0: full) attends over when the request or server caps every layer at
// `cap` (max_attention_window_size; 0: no cap): the smaller of the two non-zero ones.
inline int32_t effective_window(int32_t layer_window, int32_t cap) {
  if (layer_window <= 0) return cap > 0 ? cap : 0;
  return cap > 0 && cap < layer_window ? cap : layer_window;
}

// The window every layer stays within for a sequence capped at `cap` (0: some layer attends over everything):
// the positions before the last this many are read by no layer, so their KV blocks can be released.
int32_t kv_release_window(const ModelConfig& c, int32_t cap);
// The same over a layer_window list (empty: num_layers layers of full attention).
int32_t kv_release_window(const std::vector<int32_t>& layer_window, int32_t num_layers, int32_t cap);

// A request's window cap under the server's (both 0: none): the smaller non-zero one.
inline int32_t sequence_window_cap(int32_t server, int32_t request) { return effective_window(server, request); }

// Parses <dir>/config.json and, when present, <dir>/generation_config.json.
// Throws EngineError(not_found | bad_checkpoint | unsupported) naming the file, field and value.
ModelConfig load_model_config(const std::string& checkpoint_dir);
// The same, read as the family `architecture` names whatever config.json's architectures say (EAGLE-3 heads:
// LlamaForCausalLMEagle3 is a LlamaConfig, read as LlamaForCausalLM; architecture_name stays as the file has it).
ModelConfig load_model_config(const std::string& checkpoint_dir, const std::string& architecture);

}  // namespace engine
