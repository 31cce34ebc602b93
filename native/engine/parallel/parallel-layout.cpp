#include "parallel/parallel-layout.h"

#include <algorithm>
#include <string>

#include "errors.h"
#include "parallel/pp-partition.h"

namespace engine {

namespace {
[[noreturn]] void fail(const std::string& message) { throw EngineError(ErrorCode::invalid_argument, message); }
std::string s(int64_t v) { return std::to_string(v); }
}  // namespace

int64_t ParallelLayout::local_real_vocab(int64_t vocab_size) const {
  return std::max<int64_t>(0, std::min(vocab_end, vocab_size) - vocab_begin);
}

ParallelLayout make_parallel_layout(const ModelConfig& c, const ShardInfo& shard) {
  const int32_t tp = shard.tp_size, pp = shard.pp_size;
  if (tp < 1) fail("tp_size must be >= 1, got " + s(tp));
  if (pp < 1) fail("pp_size must be >= 1, got " + s(pp));
  if (shard.tp_rank < 0 || shard.tp_rank >= tp) fail("tp_rank " + s(shard.tp_rank) + " is outside [0, " + s(tp) + ")");
  if (shard.pp_rank < 0 || shard.pp_rank >= pp) fail("pp_rank " + s(shard.pp_rank) + " is outside [0, " + s(pp) + ")");
  if (c.num_heads <= 0 || c.num_heads % tp != 0)
    fail("num_attention_heads " + s(c.num_heads) + " is not divisible by tp " + s(tp));
  if (c.num_kv_heads <= 0) fail("num_key_value_heads must be >= 1, got " + s(c.num_kv_heads));
  const bool kv_sharded = c.num_kv_heads >= tp && c.num_kv_heads % tp == 0;
  const bool kv_replicated = c.num_kv_heads < tp && tp % c.num_kv_heads == 0;
  if (!kv_sharded && !kv_replicated)
    fail("tp " + s(tp) + " needs num_key_value_heads (" + s(c.num_kv_heads) + ") to divide or be divisible by tp");
  // (Only dense MLPs split intermediate_size; Mixtral's is its experts', checked below against moe_tp.)
  const bool dense_mlps = !c.moe.enabled() || std::count(c.moe.sparse.begin(), c.moe.sparse.end(), false) > 0;
  if (dense_mlps && c.intermediate_size % tp != 0)
    fail("intermediate_size " + s(c.intermediate_size) + " is not divisible by tp " + s(tp));
  if (pp > c.num_layers) fail("pp " + s(pp) + " > num_hidden_layers " + s(c.num_layers));
  const int32_t ep = shard.ep_size;
  if (ep < 1) fail("ep must be >= 1, got " + s(ep));
  if (tp % ep != 0) fail("ep " + s(ep) + " does not divide tp " + s(tp) + " (tp = moe_tp x ep)");
  const MoeConfig& moe = c.moe;
  if (ep > 1 && !moe.enabled())
    fail("ep " + s(ep) + " splits the experts of a mixture-of-experts model; " + c.architecture_name +
         " has none (leave ep at 1)");
  const int32_t moe_tp = tp / ep;
  if (moe.enabled()) {
    if (moe.num_experts % ep != 0) fail("num_experts " + s(moe.num_experts) + " is not divisible by ep " + s(ep));
    if (moe.expert_inter % moe_tp != 0)
      fail("the experts' intermediate size " + s(moe.expert_inter) + " is not divisible by moe_tp " + s(moe_tp) +
           " (tp " + s(tp) + " / ep " + s(ep) + ")");
    if (moe.shared_inter % tp != 0)
      fail("shared_expert_intermediate_size " + s(moe.shared_inter) + " is not divisible by tp " + s(tp));
  }

  ParallelLayout l;
  l.shard = shard;
  const int32_t r = shard.tp_rank;
  const int32_t heads = c.num_heads / tp;
  l.head_begin = r * heads;
  l.head_end = l.head_begin + heads;
  l.kv_replicated = kv_replicated;
  if (kv_sharded) {
    const int32_t kv = c.num_kv_heads / tp;
    l.kv_head_begin = r * kv;
    l.kv_head_end = l.kv_head_begin + kv;
  } else {
    // tp > num_kv_heads: a rank's query heads all fall in one GQA group (group size num_heads / num_kv_heads is
    // a multiple of heads per rank), so it needs exactly that group's kv head.
    const int32_t group = c.num_heads / c.num_kv_heads;
    l.kv_head_begin = l.head_begin / group;
    l.kv_head_end = l.kv_head_begin + 1;
  }
  const int64_t inter = c.intermediate_size / tp;
  l.inter_begin = r * inter;
  l.inter_end = l.inter_begin + inter;

  if (moe.enabled()) {
    const int32_t experts = moe.num_experts / ep;
    l.expert_begin = (r % ep) * experts;
    l.expert_end = l.expert_begin + experts;
    const int64_t cols = moe.expert_inter / moe_tp;
    l.expert_inter_begin = (r / ep) * cols;
    l.expert_inter_end = l.expert_inter_begin + cols;
    const int64_t shared = moe.shared_inter / tp;
    l.shared_inter_begin = r * shared;
    l.shared_inter_end = l.shared_inter_begin + shared;
  }

  l.vocab_padded = (static_cast<int64_t>(c.vocab_size) + tp - 1) / tp * tp;
  const int64_t vocab = l.vocab_padded / tp;
  l.vocab_begin = r * vocab;
  l.vocab_end = l.vocab_begin + vocab;

  // Evenly by default, earlier stages taking the extra layer (as TensorRT-LLM splits), or as --pp-layers says
  // (pp-partition.h; an explicit split may make a later stage the heaviest KV holder).
  const std::vector<int32_t> layers = pp_stage_layers(c, pp, shard.pp_layers);
  l.layer_begin = 0;
  for (int32_t st = 0; st < shard.pp_rank; ++st) l.layer_begin += layers[static_cast<size_t>(st)];
  l.layer_end = l.layer_begin + layers[static_cast<size_t>(shard.pp_rank)];
  return l;
}

size_t max_kv_bytes_per_token(const ModelConfig& c, int32_t tp_size, int32_t pp_size) {
  ShardInfo heaviest;
  heaviest.tp_size = tp_size;
  heaviest.pp_size = pp_size;
  const ParallelLayout l = make_parallel_layout(c, heaviest);
  return static_cast<size_t>(l.local_layers()) * 2 * static_cast<size_t>(l.local_kv_heads()) *
         static_cast<size_t>(c.head_dim) * sizeof(float);
}

}  // namespace engine
