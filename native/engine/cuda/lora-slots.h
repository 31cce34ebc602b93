// The CUDA decoder's LoRA adapters in numbered slots: each slot's slice for this rank (lora-local.h) in device
// memory of the model dtype, and the device table of descriptors the grouped kernels read (lora-kernels.h),
// [slot][local layer][target], with the bounds a launch is sized for. Adapters change between steps, not during
// one: a captured CUDA graph holds the table's address and the bounds, so whenever either changes, epoch() moves
// and the decoder drops its graphs; a slot's matrices moving is only a change of the table's contents.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "cuda/device-buffer.h"
#include "cuda/kernels.h"
#include "cuda/lora-kernels.h"
#include "lora/lora-local.h"

namespace engine::cuda {

// A projection's widths on this rank: its input (x's columns) and output (y's columns) — what every segment of
// it must fit.
struct LoraProjection {
  int64_t in = 0, out = 0;
};

class DeviceLoraSlots {
 public:
  // Once, before the first load: widths[local layer][target] (out 0: the layer has no such projection, as a
  // mixture-of-experts layer's MLP) and the model dtype the matrices are stored in.
  void init(std::vector<std::array<LoraProjection, kLoraTargetCount>> widths, DType dt);
  bool initialized() const { return initialized_; }

  // Replaces what `slot` held with `local` (converted to the model dtype on `s`, which is synchronised first: no
  // step may still read the old matrices). Throws EngineError(invalid_argument) for a segment that does not fit its
  // projection, a rank above what the kernels take, more than kLoraMaxSegments segments on one projection.
  void load(int32_t slot, const LoraLocal& local, cudaStream_t s);
  void unload(int32_t slot, cudaStream_t s);  // nothing when empty
  bool loaded(int32_t slot) const {
    return slot >= 0 && static_cast<size_t>(slot) < mem_.size() && !mem_[slot].empty();
  }
  bool empty() const { return loaded_ == 0; }
  // Slots the device table holds (> every loaded slot).
  int32_t capacity() const { return capacity_; }

  // The table's column of (layer, target): entry slot * slot_stride() is that slot's descriptor.
  const LoraTargetDesc* column(int32_t layer, LoraTarget target) const {
    return table_.as<LoraTargetDesc>() + layer * kLoraTargetCount + static_cast<int32_t>(target);
  }
  int64_t slot_stride() const { return static_cast<int64_t>(layers_) * kLoraTargetCount; }
  // The largest padded rank any adapter loaded so far has on (layer, target): the shrink's grid (0: no launch).
  // Only grows, so that a graph captured earlier never has too small a grid.
  int32_t rank_bound(int32_t layer, LoraTarget target) const {
    return rank_bound_[static_cast<size_t>(layer) * kLoraTargetCount + static_cast<size_t>(target)];
  }
  // The largest of them: the row stride of the shrink's output.
  int32_t t_stride() const { return t_stride_; }
  // Moves whenever the table's address, capacity() or a bound changed.
  uint64_t epoch() const { return epoch_; }
  size_t bytes() const;  // device memory of the adapters and the table

 private:
  void grow_table(int32_t slots, cudaStream_t st);
  void upload_slot(int32_t slot, cudaStream_t s);  // the slot's descriptors into the device table

  std::vector<std::array<LoraProjection, kLoraTargetCount>> widths_;
  int32_t layers_ = 0;
  DType dt_ = DType::bf16;
  std::vector<DeviceBuffer> mem_;            // per slot: every A and B of the adapter
  std::vector<LoraTargetDesc> host_table_;   // [capacity][layers][targets], mirrors table_
  DeviceBuffer table_;
  int32_t capacity_ = 0, loaded_ = 0, t_stride_ = 0;
  std::vector<int32_t> rank_bound_;          // [layers][targets]
  uint64_t epoch_ = 0;
  bool initialized_ = false;
};

}  // namespace engine::cuda
