// The CPU model's LoRA: adapters sliced for this rank (lora-local.h) held in numbered slots, and the deltas of one
// projection added for a batch whose rows run different slots (or none). Rows of one chunk are consecutive and
// share its slot, so each run of rows with the same slot is two small GEMMs per segment: t = x Aᵀ, y += t Bᵀ.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "lora/lora-local.h"

namespace engine {

class CpuLoraSlots {
 public:
  void load(int32_t slot, LoraLocal local);  // replaces what the slot held
  void unload(int32_t slot);
  bool empty() const { return loaded_ == 0; }

  // y[i, s.out_offset .. + s.out) += (x[i] A_sᵀ) B_sᵀ for every segment s of (layer, target) in the slot of row i
  // (row_slot[i]; -1 or an empty slot: nothing). x: [rows, in] with row stride ldx; y: row stride ldy.
  void apply(int32_t layer, LoraTarget target, const float* x, int64_t ldx, int64_t rows, const int32_t* row_slot,
             float* y, int64_t ldy);

 private:
  std::vector<std::optional<LoraLocal>> slots_;
  int32_t loaded_ = 0;
  std::vector<float> t_;  // [rows, rank] scratch
};

}  // namespace engine
