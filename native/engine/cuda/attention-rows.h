// The query rows of one paged-attention launch, and how they are grouped into thread blocks. Plain C++ (no CUDA):
// the decoder plans the groups on the host, and the CPU tests check the planning.
#pragma once
#include <climits>
#include <cstdint>

namespace engine::cuda {

// One query row: which row of q, how many positions it sees (causal: its own position + 1), where its
// sequence's block table starts in the flat `block_tables` array, and its sequence's window cap
// (SequenceChunk::window, 0: none), which the kernels combine with the launch's layer window
// (attention-window.cuh). Per row, in device memory, so a captured decode graph reads each step's caps.
//
// A row of a token tree (SequenceChunk::tree_parents) also sees only some of its chunk's positions: those at or past
// tree_base (its chunk's past_len) are visible where their bit of tree_visible (position - tree_base) is set — its
// ancestors and itself. Rows outside a tree keep tree_base at INT32_MAX: every position below ctx is theirs.
struct AttnRow {
  int32_t q_row;
  int32_t ctx;
  int32_t table;
  int32_t window = 0;
  int32_t tree_base = INT32_MAX;
  uint64_t tree_visible = 0;
};

// Rows [first, first + count) of the row list, served by one thread block: consecutive rows of one sequence (the
// same block table) read the same keys and values, so the tensor-core kernel loads each tile once for all of them.
struct AttnGroup {
  int32_t first;
  int32_t count;
};

// Splits rows[0, n) into groups of at most `per_group` consecutive rows that share a block table, in order; writes
// them to `out` (room for n) and returns how many. A decode batch (one row per sequence) gives one group per row.
inline int32_t group_attention_rows(const AttnRow* rows, int32_t n, int32_t per_group, AttnGroup* out) {
  int32_t groups = 0;
  for (int32_t i = 0; i < n;) {
    int32_t j = i + 1;
    while (j < n && j - i < per_group && rows[j].table == rows[i].table) ++j;
    out[groups++] = AttnGroup{i, j - i};
    i = j;
  }
  return groups;
}

}  // namespace engine::cuda
