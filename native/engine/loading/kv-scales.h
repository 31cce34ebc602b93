// The FP8 KV cache's per-layer scales (--kv-cache-dtype fp8): a checkpoint calibrated for FP8 KV stores one K and
// one V scale per layer — `model.layers.N.self_attn.k_scale` / `v_scale` (compressed-tensors, vLLM) or
// `model.layers.N.self_attn.k_proj.k_scale` / `v_proj.v_scale` (ModelOpt). Without them every scale is 1, as vLLM
// and TensorRT-LLM do for uncalibrated checkpoints.
#pragma once
#include <string>
#include <vector>

#include "loading/checkpoint.h"
#include "parallel/parallel-layout.h"

namespace engine {

struct KvScales {
  std::vector<float> k, v;  // [the layout's local layers]; empty: 1 everywhere
  std::string from;         // "from the checkpoint" | "1 (the checkpoint has none)"
};

// The scales of the layout's layers. A checkpoint with scales for some layers but not others, or a scale that is
// not one positive finite number, is refused naming the tensor.
KvScales read_kv_scales(const Checkpoint& checkpoint, const ParallelLayout& layout);

// Whether K/V are stored as FP8: `requested` is LoadOptions::kv_cache_dtype ("auto": what the checkpoint's
// quantization config says; "fp8"); anything else is refused naming the field and the value.
bool wants_fp8_kv(const std::string& requested, bool checkpoint_says_fp8);

}  // namespace engine
