// The part of an adapter one rank of a tp x pp grid applies, laid out against the model's fused projections
// (decoder.h): a stage keeps its layers (renumbered from 0); a column-parallel module (q / k / v / gate / up)
// keeps B's rows of the rank's heads or intermediate columns and all of A; a row-parallel one (o / down) keeps
// A's columns of the rank's input slice and all of B, so each rank's B (x_local A_localᵀ) is a partial sum the
// projection's existing all-reduce adds up — no communication of its own. Pure.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lora/lora-adapter.h"
#include "model/model-config.h"
#include "parallel/parallel-layout.h"

namespace engine {

// The model's fused projections a LoRA delta lands in: qkv [q | k | v rows], o, up [gate rows | up rows] (gated
// MLP; a plain MLP's up has only its rows), down.
enum class LoraTarget : int32_t { qkv = 0, o = 1, up = 2, down = 3 };
constexpr int32_t kLoraTargetCount = 4;

// One delta on a fused projection of this rank: y[:, out_offset .. out_offset + out) += (x Aᵀ) Bᵀ, where x is the
// projection's input on this rank (hidden for qkv / up, the rank's local columns for o / down).
struct LoraSegment {
  int64_t out_offset = 0;
  int32_t rank = 0;
  int64_t in = 0, out = 0;  // this rank's widths
  std::vector<float> a;     // [rank, in]
  std::vector<float> b;     // [out, rank]
};

struct LoraLocal {
  // [local layer][target]: the segments of that projection (none: the adapter leaves it alone).
  std::vector<std::array<std::vector<LoraSegment>, kLoraTargetCount>> layers;
  size_t bytes() const;  // of every a and b, as float32
};

// The adapter must have passed check_lora_adapter for `config`. attn_qkv becomes three segments (its A repeated).
LoraLocal localize_lora(const LoraAdapter& adapter, const ModelConfig& config, const ParallelLayout& layout);

}  // namespace engine
