#include "model/model-checks.h"

#include <algorithm>
#include <string>

#include "errors.h"

namespace engine {

void check_kv_allocation(int32_t num_blocks, int32_t tokens_per_block) {
  if (num_blocks <= 0 || tokens_per_block <= 0)
    throw EngineError(ErrorCode::invalid_argument, "allocate_kv needs num_blocks > 0 and tokens_per_block > 0, got " +
                                                       std::to_string(num_blocks) + " and " +
                                                       std::to_string(tokens_per_block));
}

void check_kv_block_copy(int32_t src, int32_t dst, int32_t num_blocks) {
  if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks)
    throw EngineError(ErrorCode::internal, "copy_kv_block(" + std::to_string(src) + ", " + std::to_string(dst) +
                                               ") outside the pool of " + std::to_string(num_blocks) + " blocks");
}

void complete_kv_scales(std::vector<float>& k_scales, std::vector<float>& v_scales, int32_t num_layers) {
  if (k_scales.empty()) k_scales.assign(static_cast<size_t>(num_layers), 1.0f);
  if (v_scales.empty()) v_scales.assign(static_cast<size_t>(num_layers), 1.0f);
  if (static_cast<int32_t>(k_scales.size()) != num_layers || static_cast<int32_t>(v_scales.size()) != num_layers)
    throw EngineError(ErrorCode::internal, "use_fp8_kv got " + std::to_string(k_scales.size()) + " / " +
                                               std::to_string(v_scales.size()) + " scales for " +
                                               std::to_string(num_layers) + " layers");
}

std::string fp8_kv_dtype_name(const std::string& from) { return "fp8 (e4m3, per-layer k/v scales " + from + ")"; }

int32_t first_read_position(const SequenceChunk& ch, const ModelConfig& config) {
  const int32_t w = kv_release_window(config, ch.window);
  return w > 0 ? std::max(0, ch.past_len - (w - 1)) : 0;
}

void validate_chunks(const std::vector<SequenceChunk>& chunks, const ModelConfig& config, bool learned_positions,
                     int32_t num_blocks, int32_t tokens_per_block, bool prompt_tables) {
  if (num_blocks == 0) throw EngineError(ErrorCode::internal, "forward called before allocate_kv");
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const std::string which = "chunk " + std::to_string(c);
    if (ch.tokens.empty()) throw EngineError(ErrorCode::internal, which + " has no tokens");
    if (ch.past_len < 0) throw EngineError(ErrorCode::internal, which + " has past_len " + std::to_string(ch.past_len));
    if (ch.window < 0) throw EngineError(ErrorCode::internal, which + " has window " + std::to_string(ch.window));
    const int64_t total = static_cast<int64_t>(ch.past_len) + static_cast<int64_t>(ch.tokens.size());
    if (learned_positions && total > config.max_position_embeddings)
      throw EngineError(ErrorCode::invalid_argument,
                        which + " reaches position " + std::to_string(total - 1) + " but the model has only " +
                            std::to_string(config.max_position_embeddings) + " position embeddings");
    if (ch.tree_past < 0 || ch.tree_past > ch.past_len || (ch.tree_past > 0 && ch.tree_parents.empty()))
      throw EngineError(ErrorCode::internal, which + " has tree_past " + std::to_string(ch.tree_past) + " (past_len " +
                                                 std::to_string(ch.past_len) + ", " +
                                                 std::to_string(ch.tree_parents.size()) + " tree parents)");
    if (!ch.tree_parents.empty()) {
      const auto n = static_cast<int32_t>(ch.tokens.size()) + ch.tree_past;  // the tree's nodes, earlier ones first
      if (static_cast<int32_t>(ch.tree_parents.size()) != n || n > kMaxTreeTokens || ch.tree_parents[0] != -1)
        throw EngineError(ErrorCode::internal, which + ": a token tree of " + std::to_string(ch.tree_parents.size()) +
                                                   " parents for " + std::to_string(n) + " nodes (at most " +
                                                   std::to_string(kMaxTreeTokens) + ", the first -1)");
      for (int32_t i = 1; i < n; ++i)
        if (ch.tree_parents[static_cast<size_t>(i)] < 0 || ch.tree_parents[static_cast<size_t>(i)] >= i)
          throw EngineError(ErrorCode::internal, which + ": token tree parent " + std::to_string(ch.tree_parents[static_cast<size_t>(i)]) +
                                                     " of token " + std::to_string(i) + " is not an earlier token");
    }
    const int64_t ids = static_cast<int64_t>(config.vocab_size) +
                        (prompt_tables && ch.prompt_table ? ch.prompt_table->rows : 0);  // virtual ids: p-tuning
    for (int32_t t : ch.tokens)
      if (t < 0 || t >= ids)
        throw EngineError(ErrorCode::invalid_argument, which + " has token id " + std::to_string(t) +
                                                           " outside the vocabulary [0, " + std::to_string(ids) + ")");
    const int64_t blocks_needed = (total + tokens_per_block - 1) / tokens_per_block;
    if (static_cast<int64_t>(ch.block_ids.size()) < blocks_needed)
      throw EngineError(ErrorCode::internal, which + " covers " + std::to_string(total) + " positions and needs " +
                                                 std::to_string(blocks_needed) + " blocks but its block table has " +
                                                 std::to_string(ch.block_ids.size()));
    for (int64_t b = first_read_position(ch, config) / tokens_per_block; b < blocks_needed; ++b)
      if (ch.block_ids[b] < 0 || ch.block_ids[b] >= num_blocks)
        throw EngineError(ErrorCode::internal, which + " block table entry " + std::to_string(b) + " is block " +
                                                   std::to_string(ch.block_ids[b]) + ", outside the pool of " +
                                                   std::to_string(num_blocks) + " blocks");
  }
}

bool token_trees_fit(const ModelConfig& config) {
  for (int32_t w : config.layer_window)
    if (w > 0) return false;
  return true;
}

void check_medusa_heads(const MedusaHeads& heads, const ModelConfig& config, bool last_stage, int32_t pp_rank,
                        int32_t pp_size) {
  // (Under pp the leader keeps only the heads' count and asks the last stage for guesses: LeaderModel.)
  if (!last_stage)
    throw EngineError(ErrorCode::internal, "Medusa heads given to pipeline stage " + std::to_string(pp_rank) + " of " +
                                               std::to_string(pp_size) + ", whose forward does not end with the final norm");
  if (heads.hidden != config.hidden_size || heads.vocab != config.vocab_size)
    throw EngineError(ErrorCode::bad_checkpoint, "Medusa heads (" + heads.source + ") are for hidden_size " +
                                                     std::to_string(heads.hidden) + " and vocab_size " +
                                                     std::to_string(heads.vocab) + ", the model has " +
                                                     std::to_string(config.hidden_size) + " and " +
                                                     std::to_string(config.vocab_size));
}

}  // namespace engine
