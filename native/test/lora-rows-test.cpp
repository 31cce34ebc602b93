// A step's LoRA rows as the CUDA kernels take them (cuda/lora-rows.h, host code, checked here without a GPU): rows
// grouped by slot in row order into tiles of at most 8 rows of one slot, the bounds a captured graph's launches are
// sized for, and the inverse of the grouped row list (each row's grouped row, -1 where it runs no adapter), which a
// kernel adding a row's deltas as it reads the row looks them up in, and the slots that stacked products line up
// side by side (each row's position among them).
#include <vector>

#include "check.h"
#include "cuda/lora-rows.h"

using engine::cuda::LoraTile;
namespace cuda = engine::cuda;

TEST_MAIN({
  // 14 rows over slots 0 and 2 (and none): grouped by slot in row order, tiles of at most 8 rows.
  const int32_t slots[] = {2, -1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, 0};
  const int64_t n = sizeof(slots) / sizeof(slots[0]);
  std::vector<int32_t> rows(static_cast<size_t>(n));
  std::vector<LoraTile> tiles(static_cast<size_t>(cuda::lora_max_tiles(n, 3)));
  int64_t grouped = 0;
  const int32_t nt = cuda::group_lora_rows(slots, n, 3, rows.data(), tiles.data(), &grouped);
  CHECK(grouped == 12);
  CHECK(nt == 3);
  CHECK(rows[0] == 2 && rows[1] == 13 && rows[2] == 0 && rows[3] == 3 && rows[11] == 11);
  CHECK(tiles[0].slot == 0 && tiles[0].begin == 0 && tiles[0].count == 2);
  CHECK(tiles[1].slot == 2 && tiles[1].begin == 2 && tiles[1].count == 8);
  CHECK(tiles[2].slot == 2 && tiles[2].begin == 10 && tiles[2].count == 2);
  CHECK(cuda::lora_max_tiles(64, 8) == 16 && cuda::lora_max_tiles(1, 8) == 1 && cuda::lora_max_tiles(3, 1) == 1);
  // A graph's tile blocks: every tile of 64 rows over 8 slots; 16 of the 72 possible over 64 slots.
  CHECK(cuda::lora_grid_tiles(64, 8) == 16 && cuda::lora_grid_tiles(64, 64) == 16 && cuda::lora_grid_tiles(1, 64) == 1);

  // The inverse: every grouped row p is row rows[p], and the rows that run no adapter (1 and 12) have none.
  std::vector<int32_t> inverse(static_cast<size_t>(n), 7);
  cuda::invert_lora_rows(rows.data(), tiles.data(), nt, n, inverse.data());
  for (int32_t p = 0; p < grouped; ++p)
    CHECK_MSG(inverse[rows[p]] == p, "grouped row %d: row %d maps to %d", p, rows[p], inverse[rows[p]]);
  CHECK(inverse[1] == -1 && inverse[12] == -1);
  CHECK(inverse[2] == 0 && inverse[13] == 1 && inverse[0] == 2 && inverse[11] == 11);

  // No row runs an adapter: no tiles, every row -1 (whatever the buffer held).
  const int32_t none[] = {-1, -1, -1};
  std::vector<int32_t> rows_none(3), inverse_none(3, 5);
  std::vector<LoraTile> tiles_none(static_cast<size_t>(cuda::lora_max_tiles(3, 4)));
  int64_t grouped_none = -1;
  const int32_t nt_none = cuda::group_lora_rows(none, 3, 4, rows_none.data(), tiles_none.data(), &grouped_none);
  CHECK(nt_none == 0 && grouped_none == 0);
  cuda::invert_lora_rows(rows_none.data(), tiles_none.data(), nt_none, 3, inverse_none.data());
  CHECK(inverse_none[0] == -1 && inverse_none[1] == -1 && inverse_none[2] == -1);

  // 64 decode rows round-robin over 8 slots (the benchmark's batch): 8 full tiles, and the inverse a permutation.
  std::vector<int32_t> rr(64), rows64(64), inverse64(64);
  for (int32_t r = 0; r < 64; ++r) rr[static_cast<size_t>(r)] = r % 8;
  std::vector<LoraTile> tiles64(static_cast<size_t>(cuda::lora_max_tiles(64, 8)));
  int64_t grouped64 = 0;
  const int32_t nt64 = cuda::group_lora_rows(rr.data(), 64, 8, rows64.data(), tiles64.data(), &grouped64);
  CHECK(nt64 == 8 && grouped64 == 64);
  cuda::invert_lora_rows(rows64.data(), tiles64.data(), nt64, 64, inverse64.data());
  std::vector<int> seen(64, 0);
  bool round_trip = true;
  for (int32_t r = 0; r < 64; ++r) {
    const int32_t p = inverse64[static_cast<size_t>(r)];
    round_trip = round_trip && p >= 0 && p < 64 && rows64[static_cast<size_t>(p)] == r;
    if (p >= 0 && p < 64) seen[static_cast<size_t>(p)] += 1;
  }
  CHECK(round_trip);
  bool once = true;
  for (int v : seen) once = once && v == 1;
  CHECK(once);
  // Row 9 runs slot 1: its grouped row lies in slot 1's tile, the second (rows 1, 9, 17, ..).
  CHECK(tiles64[1].slot == 1 && inverse64[9] == tiles64[1].begin + 1);

  // The stacked products' slots: the first example's are 0 and 2, in that order, each row at its slot's position;
  // rows 1 and 12 run none.
  std::vector<int32_t> stack_slots(3, 9), blocks(static_cast<size_t>(n), 9);
  CHECK(cuda::stack_lora_slots(rows.data(), tiles.data(), nt, n, stack_slots.data(), blocks.data()) == 2);
  CHECK(stack_slots[0] == 0 && stack_slots[1] == 2);
  CHECK(blocks[2] == 0 && blocks[13] == 0 && blocks[0] == 1 && blocks[11] == 1 && blocks[1] == -1 && blocks[12] == -1);
  // Round-robin over 8 slots: 8 of them; row r at position r % 8. No tiles: none, every row -1.
  std::vector<int32_t> slots64(8, -5), blocks64(64, -5);
  CHECK(cuda::stack_lora_slots(rows64.data(), tiles64.data(), nt64, 64, slots64.data(), blocks64.data()) == 8);
  bool rr_blocks = true;
  for (int32_t r = 0; r < 64; ++r)
    rr_blocks = rr_blocks && blocks64[static_cast<size_t>(r)] == r % 8 && slots64[r % 8] == r % 8;
  CHECK(rr_blocks);
  std::vector<int32_t> blocks_none(3, 4);
  CHECK(cuda::stack_lora_slots(rows_none.data(), tiles_none.data(), nt_none, 3, nullptr, blocks_none.data()) == 0);
  CHECK(blocks_none[0] == -1 && blocks_none[1] == -1 && blocks_none[2] == -1);
})
