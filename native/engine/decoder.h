// The decoder-only transformer both supported families reduce to: embeddings (+ learned positions for GPT-2),
// per layer [norm -> fused qkv -> (rope) -> paged attention -> out proj + residual -> norm -> MLP + residual],
// final norm, LM head. llama.cpp and gpt2.cpp only map checkpoint tensors into these weights, so the batched,
// paged forward pass exists once.
#pragma once
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "cpu/activation.h"
#include "cpu/attention.h"
#include "model.h"

namespace engine {

// A projection in nn.Linear layout.
struct Linear {
  std::vector<float> w;  // [out, in]
  std::vector<float> b;  // [out], empty without bias
  int64_t out = 0, in = 0;
};

struct Norm {
  std::vector<float> w;  // [hidden]
  std::vector<float> b;  // [hidden] for LayerNorm, empty for RMSNorm
};

struct DecoderLayerWeights {
  Norm attn_norm;
  Linear qkv;   // [q_dim + 2 * kv_dim, hidden]: q rows, then k, then v (one GEMM for all three)
  Linear o;     // [hidden, q_dim]
  Norm mlp_norm;
  Linear up;    // gated: [2 * inter, hidden] gate rows then up rows; else [inter, hidden]
  Linear down;  // [hidden, inter]
};

struct DecoderWeights {
  std::vector<float> embed;      // [vocab, hidden]
  std::vector<float> pos_embed;  // [max_positions, hidden]; empty when positions come from rope
  std::vector<DecoderLayerWeights> layers;
  Norm final_norm;
  std::vector<float> lm_head;    // [vocab, hidden]; empty: tied to embed
};

struct DecoderSpec {
  bool rms_norm = true;     // false: LayerNorm with bias
  bool rope = true;         // false: learned position embeddings
  bool gated_mlp = true;    // act(gate) * up, else act(up)
  cpu::Activation act = cpu::Activation::silu;
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderSpec spec, DecoderWeights weights, int32_t num_threads);

  const ModelConfig& config() const override { return config_; }
  size_t kv_bytes_per_token() const override;
  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override;
  size_t weight_bytes() const override;
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override;

 private:
  void validate(const std::vector<SequenceChunk>& chunks) const;
  void norm(const Norm& n, const float* x, float* out, int64_t rows) const;
  // y = x Wᵀ + b (accumulate: y += x Wᵀ + b)
  void linear(const Linear& l, const float* x, int64_t rows, float* y, bool accumulate) const;

  ModelConfig config_;
  DecoderSpec spec_;
  DecoderWeights w_;
  int32_t num_threads_;
  std::thread::id threads_set_for_;  // OpenMP's thread count is per calling thread
  std::vector<float> inv_freq_;      // [head_dim / 2]
  int64_t q_dim_, kv_dim_;

  // KV pool: one K and one V array per layer, [num_blocks, num_kv_heads, tokens_per_block, head_dim] each.
  int32_t num_blocks_ = 0, tokens_per_block_ = 0;
  std::vector<std::unique_ptr<float[]>> k_pool_, v_pool_;

  // Scratch, grown to the largest iteration seen and reused: forward() allocates nothing in steady state.
  std::vector<float> x_, xn_, qkv_, attn_, mlp_, mlp_act_, cos_, sin_;  // [n_tokens, ...]
  std::vector<int32_t> positions_, row_chunk_;                          // [n_tokens]
  std::vector<int64_t> out_rows_;                                       // [n_logit_rows]
  std::vector<cpu::AttentionChunk> att_chunks_;
};

}  // namespace engine
