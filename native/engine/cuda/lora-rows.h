// One step's LoRA rows as the grouped kernels (lora-kernels.h) take them: the rows of a projection that run an
// adapter, grouped by slot so that each thread block serves up to kLoraTileRows rows of ONE slot and reads that
// adapter's A / B once for all of them (a decode batch of 64 rows over 8 adapters reads each adapter's matrices
// once per projection, not once per row). Plain C++ (no CUDA): the host plans the tiles, the CPU tests can check it.
#pragma once
#include <cstdint>

namespace engine::cuda {

// Rows of one slot a thread block serves together: the shrink keeps [kLoraTileRows][rank rows] sums in registers.
constexpr int32_t kLoraTileRows = 8;

// Grouped rows [begin, begin + count) (indices into the grouped row list) all run `slot`.
struct LoraTile {
  int32_t slot;
  int32_t begin;
  int32_t count;  // 1 .. kLoraTileRows
  int32_t pad_ = 0;
};

// The most tiles `rows` rows over at most `slots` distinct slots can make: each slot's run of n rows takes
// ceil(n / kLoraTileRows) <= n / kLoraTileRows + 1 tiles. A CUDA graph's launches are sized for this bound (its
// extra blocks find no tile and return), so that every step of that batch size replays the same graph.
inline int32_t lora_max_tiles(int64_t rows, int32_t slots) {
  const int64_t distinct = rows < slots ? rows : slots;
  return static_cast<int32_t>(rows / kLoraTileRows + distinct);
}

// The tile dimension of a graph's lora_add launches for `rows` rows: enough blocks for every tile of the usual steps
// (each slot's rows in full tiles, up to 8 slots with a partial one), not for the bound above (which counts a tile
// for every slot the cache has: 72 for 64 rows over 64 slots), so that a step's grid is not mostly empty blocks.
// lora_add's blocks walk the tiles with this stride: a step with more tiles gives some blocks a second one. (The
// shrink and expand keep a block per tile: walking tiles made their decode launches 2-4 µs slower, measured.)
inline int32_t lora_grid_tiles(int64_t rows, int32_t slots) {
  const int64_t distinct = rows < slots ? rows : slots;
  const int64_t usual = (rows + kLoraTileRows - 1) / kLoraTileRows + (distinct < 8 ? distinct : 8);
  const int32_t bound = lora_max_tiles(rows, slots);
  return usual < bound ? static_cast<int32_t>(usual) : bound;
}

// Groups rows [0, n) by row_slot[i] (-1: no adapter, left out), stable within a slot, slots in increasing order:
// rows_out[p] is the p-th grouped row (room for n), tiles_out its tiles (room for lora_max_tiles(n, num_slots)).
// Every slot must be < num_slots. Returns the number of tiles; *n_rows gets the number of grouped rows.
int32_t group_lora_rows(const int32_t* row_slot, int64_t n, int32_t num_slots, int32_t* rows_out, LoraTile* tiles_out,
                        int64_t* n_rows);

// The inverse of group_lora_rows' row list for rows [0, n): grouped_out[r] is the grouped row that row r is, -1 where
// it runs no adapter (a kernel that adds a row's deltas as it reads the row finds them there: kernels.h's RowDelta).
void invert_lora_rows(const int32_t* rows, const LoraTile* tiles, int32_t n_tiles, int64_t n, int32_t* grouped_out);

// The slots a step's tiles name, for products that stack those adapters side by side (lora-kernels.h's lora_stack):
// slots_out gets them in increasing order (room for the tiles' distinct slots), block_out[r] for rows [0, n) the
// position of row r's slot among them (-1 where it runs no adapter). Returns how many slots there are.
int32_t stack_lora_slots(const int32_t* rows, const LoraTile* tiles, int32_t n_tiles, int64_t n, int32_t* slots_out,
                         int32_t* block_out);

}  // namespace engine::cuda
