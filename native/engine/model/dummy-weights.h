// Random weights of a config.json's shapes for benchmarking without a checkpoint (load_format "dummy", as vLLM's
// --load-format dummy). The plan says, for this rank of the tp x pp grid, which slice of which global tensor fills
// each fused weight, so the CPU model materialises it on the host and the CUDA model generates it on the GPU
// (never 16 GB through the host or the disk for an 8B shape), and a tp = 2 dummy model equals the tp = 1 one.
#pragma once
#include <cstdint>
#include <vector>

#include "model/decoder.h"
#include "model/model-config.h"
#include "parallel/parallel-layout.h"

namespace engine {

constexpr float kDummyScale = 1.0f / 32;  // a power of two (exact in bf16 / fp16), about transformers' 0.02 std

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of global tensor `tensor` (global_cols wide).
struct DummyPart {
  uint32_t tensor = 0;
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0, global_cols = 1;
};
// An [out, in] matrix whose rows are the parts in order; rows past them stay zero (vocab padding).
struct DummyMatrix {
  int64_t out = 0, in = 0;
  std::vector<DummyPart> parts;
  bool empty() const { return out == 0; }
};
struct DummyLinear {
  DummyMatrix w;
  DummyMatrix b;  // [out, 1]; empty: no bias
};
struct DummyNorm {
  int64_t dim = 0;  // weight 1
  bool bias = false;  // LayerNorm: bias 0
};
// A mixture-of-experts layer's MLP (decoder.h's MoeWeights): empty `experts` for a dense layer.
struct DummyExpert {
  DummyMatrix up, down;
};
struct DummyMoe {
  DummyMatrix router;                // [num_experts, hidden], whole
  std::vector<DummyExpert> experts;  // this rank's
  DummyExpert shared;                // Qwen2-MoE's shared expert (empty: none)
  DummyMatrix shared_gate;           // [1, hidden]
};
struct DummyLayer {
  DummyNorm attn_norm, mlp_norm;
  DummyNorm q_norm, k_norm;  // dim 0: none (dim head_dim for Qwen3)
  DummyNorm post_attn_norm, post_mlp_norm;  // dim 0: none (Gemma 2's sandwich norms)
  DummyLinear qkv, o, up, down;  // up / down empty in a mixture-of-experts layer
  DummyMoe moe;
};
struct DummyPlan {
  DummyMatrix embed, pos_embed, lm_head;  // empty where the stage has none (lm_head: tied to embed)
  std::vector<DummyLayer> layers;
  bool has_final_norm = false;
  DummyNorm final_norm;
};

DummyPlan dummy_plan(const ModelConfig& config, const DecoderSpec& spec, const ParallelLayout& layout);
// The host weights of a plan (the CPU model's dummy load).
DecoderWeights materialize_dummy(const DummyPlan& plan, uint64_t seed);

}  // namespace engine
