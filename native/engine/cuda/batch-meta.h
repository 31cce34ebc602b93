// The per-iteration metadata the CUDA decoder's kernels read — token ids, positions, K/V destinations, attention
// rows and their groups, logit rows, block tables — in one block of host memory that goes to the device in one
// copy. Plain C++ (no CUDA): laying the block out and filling it are host work, checkable without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/attention-rows.h"
#include "model/batch-layout.h"
#include "model/model.h"

namespace engine::cuda {

// Byte offsets of each array in the block, each 8-byte aligned.
struct MetaLayout {
  size_t tokens, positions, kv_dst, use_long, rows_all, rows_last, groups_all, groups_last, groups_wide, out_rows, tables,
      total;
};
// For T token rows, R logit rows and room for `table_entries` block-table entries (a CUDA graph's block is sized
// for a fixed number, so its layout depends on the batch size alone).
MetaLayout meta_layout(int64_t T, int64_t R, int64_t table_entries);

// The KV pool's geometry the K/V destinations are computed from, and the attention's grouping.
struct MetaGeometry {
  int32_t tokens_per_block = 0;
  int64_t block_elems = 0;  // elements of one block of one layer's K (or V): kv heads * tokens_per_block * head_dim
  int32_t head_dim = 0;
  int32_t rows_per_group = 1;  // attention_rows_per_group(): most rows one attention block serves
  // attention_prefill_rows_per_group(): the same for the prompt-rows kernel (0: its groups are not planned).
  int32_t rows_per_wide_group = 0;
  // longrope's original_max_position_embeddings (0: not longrope): a sequence longer than this after the step
  // rotates its tokens by the long frequencies.
  int32_t long_after = 0;
};

// The arrays of one iteration's block (on the device once copied), as the kernels take them.
struct BatchMeta {
  const int32_t* tokens;      // [T]
  const int32_t* positions;   // [T]
  const int64_t* kv_dst;      // [T] element offset of each token's K (and V) row in its layer's pool
  const uint8_t* use_long;    // [T] longrope: the token rotates by the long frequencies; null unless longrope
  const AttnRow* rows_all;    // [T] every token row as an attention query row
  const AttnRow* rows_last;   // [R] the logit rows only (the model's last layer)
  const AttnGroup* groups_all;  // rows_all / rows_last grouped for the attention kernel (attention-rows.h)
  const AttnGroup* groups_last;
  int32_t n_groups_all, n_groups_last;
  // rows_all grouped for the prompt-rows kernel (AttnArgs::wide_groups); n_groups_wide 0 (not planned) for a
  // decode batch or without rows_per_wide_group.
  const AttnGroup* groups_wide;
  int32_t n_groups_wide;
  const int32_t* out_rows;    // [R] token row of each logit row
  const int32_t* tables;      // every chunk's block table, concatenated in chunk order
  bool one_token_each;        // every chunk is one token (a decode batch): AttnArgs::new_last_only
  int32_t max_ctx;            // positions the longest row attends to
};

// Fills the block at `host` (ml.total bytes) for `chunks`, laid out by `layout`; returns where each array lies in
// a copy of the block at `device` (the kernels' view).
BatchMeta fill_batch_meta(const std::vector<SequenceChunk>& chunks, const BatchLayout& layout, const MetaLayout& ml,
                          const MetaGeometry& g, char* host, const char* device);

}  // namespace engine::cuda
