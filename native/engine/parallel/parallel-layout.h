// Which slice of a model one rank of a tensor-parallel (tp) x pipeline-parallel (pp) grid holds, computed once
// from the config and the rank's place, with TensorRT-LLM's choices: attention heads, MLP columns and the vocab
// are split evenly across tp ranks (Megatron-style column/row parallel layers, vocab-parallel embedding and LM
// head), layers are split into contiguous pipeline stages. Pure: no I/O, no communication, so every rank can
// compute (and validate) every other rank's layout and reach the same verdict without talking.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/model-config.h"
#include "model/model.h"

namespace engine {

struct ParallelLayout {
  ShardInfo shard;

  // Query heads [head_begin, head_end): num_heads / tp of them.
  int32_t head_begin = 0, head_end = 0;
  // KV heads this rank stores and attends with, [kv_head_begin, kv_head_end). Sharded (num_kv_heads / tp each)
  // when num_kv_heads % tp == 0; replicated (exactly the one kv head its query heads read) when
  // num_kv_heads < tp, as TensorRT-LLM does for GQA/MQA with tp > num_kv_heads.
  int32_t kv_head_begin = 0, kv_head_end = 0;
  bool kv_replicated = false;

  // MLP intermediate columns [inter_begin, inter_end): intermediate_size / tp of them.
  int64_t inter_begin = 0, inter_end = 0;

  // Mixture-of-experts layers (TensorRT-LLM's mapping): tp = moe_tp x ep; tp rank r is expert-parallel rank
  // r % ep and moe-tp rank r / ep. It holds experts [expert_begin, expert_end) (num_experts / ep of them) and of
  // each their intermediate columns [expert_inter_begin, expert_inter_end) (expert_inter / moe_tp); a shared expert
  // is split over all tp ranks like a dense MLP. Zero for dense models.
  int32_t expert_begin = 0, expert_end = 0;
  int64_t expert_inter_begin = 0, expert_inter_end = 0;
  int64_t shared_inter_begin = 0, shared_inter_end = 0;

  // Vocab rows [vocab_begin, vocab_end) of the embedding and LM head, in the vocab padded up to a multiple of tp
  // (vocab_padded). Rows >= vocab_size are padding: zero embeddings, -inf logits, trimmed from the output.
  int64_t vocab_padded = 0;
  int64_t vocab_begin = 0, vocab_end = 0;

  // Decoder layers [layer_begin, layer_end) of this pipeline stage (global layer indices).
  int32_t layer_begin = 0, layer_end = 0;

  int32_t local_heads() const { return head_end - head_begin; }
  int32_t local_kv_heads() const { return kv_head_end - kv_head_begin; }
  int64_t local_inter() const { return inter_end - inter_begin; }
  int32_t local_experts() const { return expert_end - expert_begin; }
  int64_t local_expert_inter() const { return expert_inter_end - expert_inter_begin; }
  int64_t local_shared_inter() const { return shared_inter_end - shared_inter_begin; }
  int64_t local_vocab() const { return vocab_end - vocab_begin; }  // padded rows included
  // Real (checkpoint) vocab rows of this rank's slice: [vocab_begin, vocab_begin + local_real_vocab).
  int64_t local_real_vocab(int64_t vocab_size) const;
  int32_t local_layers() const { return layer_end - layer_begin; }
  bool first_stage() const { return shard.pp_rank == 0; }
  bool last_stage() const { return shard.pp_rank == shard.pp_size - 1; }
  // World rank 0 of the grid: pp stage 0, tp rank 0. It schedules, samples, and ends forward() with the logits.
  bool leader() const { return shard.pp_rank == 0 && shard.tp_rank == 0; }
};

// Throws EngineError(invalid_argument) naming the numbers when the grid cannot split this model:
// "num_attention_heads 6 is not divisible by tp 4", "tp 4 needs num_key_value_heads (3) to divide or be divisible
// by tp", "intermediate_size 100 is not divisible by tp 3", "pp 5 > num_hidden_layers 2", ranks out of range;
// for mixture-of-experts models "num_experts 8 is not divisible by ep 3", "ep 3 does not divide tp 4", the experts'
// intermediate size not divisible by moe_tp; ep > 1 on a dense model.
ParallelLayout make_parallel_layout(const ModelConfig& config, const ShardInfo& shard);

// KV bytes per token (fp32 K and V of all its layers and kv heads) on the heaviest rank of a tp x pp grid. Sizing
// the pool from a memory budget with this gives every rank the same block count, and no rank exceeds the budget
// (stage 0 carries the extra layers, so it is the heaviest; kv heads per rank are equal across tp ranks).
size_t max_kv_bytes_per_token(const ModelConfig& config, int32_t tp_size, int32_t pp_size);

}  // namespace engine
