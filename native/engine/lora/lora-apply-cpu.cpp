#include "lora/lora-apply-cpu.h"

#include <string>

#include "cpu/gemm.h"
#include "errors.h"
#include "model/scratch.h"

namespace engine {

void CpuLoraSlots::load(int32_t slot, LoraLocal local) {
  if (slot < 0) throw EngineError(ErrorCode::internal, "LoRA slot " + std::to_string(slot) + " is negative");
  if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  if (!slots_[slot]) ++loaded_;
  slots_[slot] = std::move(local);
}

void CpuLoraSlots::unload(int32_t slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size() || !slots_[slot]) return;
  slots_[slot].reset();
  --loaded_;
}

void CpuLoraSlots::apply(int32_t layer, LoraTarget target, const float* x, int64_t ldx, int64_t rows,
                         const int32_t* row_slot, float* y, int64_t ldy) {
  if (loaded_ == 0) return;
  int64_t begin = 0;
  while (begin < rows) {
    const int32_t slot = row_slot[begin];
    int64_t end = begin + 1;
    while (end < rows && row_slot[end] == slot) ++end;
    const int64_t n = end - begin;
    if (slot >= 0 && static_cast<size_t>(slot) < slots_.size() && slots_[slot]) {
      const LoraLocal& a = *slots_[slot];
      if (static_cast<size_t>(layer) < a.layers.size()) {
        for (const LoraSegment& s : a.layers[layer][static_cast<size_t>(target)]) {
          float* t = grow(t_, static_cast<size_t>(n * s.rank));
          cpu::gemm_xwt(n, s.rank, s.in, x + begin * ldx, ldx, s.a.data(), t, s.rank, false);
          cpu::gemm_xwt(n, s.out, s.rank, t, s.rank, s.b.data(), y + begin * ldy + s.out_offset, ldy, true);
        }
      }
    }
    begin = end;
  }
}

}  // namespace engine
