#include "cuda/lora-rows.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace engine::cuda {

int32_t group_lora_rows(const int32_t* row_slot, int64_t n, int32_t num_slots, int32_t* rows_out, LoraTile* tiles_out,
                        int64_t* n_rows) {
  // Counting sort by slot: each slot's rows land consecutively, in row order.
  std::vector<int64_t> first(static_cast<size_t>(num_slots) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    if (row_slot[i] >= 0) ++first[static_cast<size_t>(row_slot[i]) + 1];
  for (int32_t s = 0; s < num_slots; ++s) first[s + 1] += first[s];
  const int64_t total = first[num_slots];
  std::vector<int64_t> at(first.begin(), first.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    if (row_slot[i] >= 0) rows_out[at[row_slot[i]]++] = static_cast<int32_t>(i);
  int32_t tiles = 0;
  for (int32_t s = 0; s < num_slots; ++s)
    for (int64_t b = first[s]; b < first[s + 1]; b += kLoraTileRows) {
      const int64_t count = first[s + 1] - b < kLoraTileRows ? first[s + 1] - b : kLoraTileRows;
      tiles_out[tiles++] = LoraTile{s, static_cast<int32_t>(b), static_cast<int32_t>(count)};
    }
  *n_rows = total;
  return tiles;
}

void invert_lora_rows(const int32_t* rows, const LoraTile* tiles, int32_t n_tiles, int64_t n, int32_t* grouped_out) {
  std::fill(grouped_out, grouped_out + n, -1);
  for (int32_t k = 0; k < n_tiles; ++k)
    for (int32_t p = tiles[k].begin; p < tiles[k].begin + tiles[k].count; ++p) grouped_out[rows[p]] = p;
}

int32_t stack_lora_slots(const int32_t* rows, const LoraTile* tiles, int32_t n_tiles, int64_t n, int32_t* slots_out,
                         int32_t* block_out) {
  std::fill(block_out, block_out + n, -1);
  int32_t count = 0;
  for (int32_t k = 0; k < n_tiles; ++k) {
    // group_lora_rows lists a slot's tiles one after another, slots in increasing order.
    if (count == 0 || slots_out[count - 1] != tiles[k].slot) slots_out[count++] = tiles[k].slot;
    for (int32_t p = tiles[k].begin; p < tiles[k].begin + tiles[k].count; ++p) block_out[rows[p]] = count - 1;
  }
  return count;
}

}  // namespace engine::cuda
