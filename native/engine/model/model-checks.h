// The checks every Model runs before touching its KV pool: the pool's size and a block copy's ids; an iteration's
// chunks (token ids inside the vocab, block tables covering every position, block ids inside the pool, positions
// inside a learned position table). One definition for the CPU and the device models, so both reject the same
// inputs with the same messages.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model-config.h"
#include "model/model.h"

namespace engine {

// allocate_kv's arguments: both > 0, else EngineError(invalid_argument).
void check_kv_allocation(int32_t num_blocks, int32_t tokens_per_block);
// copy_kv_block's block ids, inside a pool of num_blocks blocks, else EngineError(internal) (an executor bug).
void check_kv_block_copy(int32_t src, int32_t dst, int32_t num_blocks);
// use_fp8_kv's per-layer scales: empty lists become 1 for each of num_layers layers; any other length is
// EngineError(internal) (the loader reads one per layer of the layout).
void complete_kv_scales(std::vector<float>& k_scales, std::vector<float>& v_scales, int32_t num_layers);
// kv_cache_dtype() of a model storing K/V as e4m3: `from` says where the scales came from.
std::string fp8_kv_dtype_name(const std::string& from);

// The first position any layer reads for any token of `ch`: past_len minus the widest window less one when every
// layer is windowed for it (model-config.h's kv_release_window), else 0. Block-table entries wholly before it may
// be -1 (released); attention kernels never read them.
int32_t first_read_position(const SequenceChunk& ch, const ModelConfig& config);

// Whether chunks may be token trees (Model::supports_token_trees): a sliding window counts positions back from a
// token's slot, which a tree's depth-based positions do not match, so full attention only.
bool token_trees_fit(const ModelConfig& config);
// Medusa heads given to a model whose forward ends on pipeline stage pp_rank of pp_size (last_stage: this one does,
// with the final norm): EngineError(internal) elsewhere, (bad_checkpoint) for heads of another hidden size or
// vocabulary, naming both.
void check_medusa_heads(const MedusaHeads& heads, const ModelConfig& config, bool last_stage, int32_t pp_rank,
                        int32_t pp_size);

// Throws EngineError (internal for executor bugs, invalid_argument for token ids and positions).
// `learned_positions`: the model adds a position table of max_position_embeddings rows (GPT-2). `prompt_tables`:
// the model embeds virtual tokens (Model::supports_prompt_tables), so a chunk's table widens its ids by its rows.
void validate_chunks(const std::vector<SequenceChunk>& chunks, const ModelConfig& config, bool learned_positions,
                     int32_t num_blocks, int32_t tokens_per_block, bool prompt_tables = false);

}  // namespace engine
