// Sliding windows and soft-capping in the attention kernels, shared by the SIMT kernel and the merge
// (kernels-attention.cu) and the tensor-core kernel (kernels-attention-mma.cu), which must agree on which
// partitions hold a row's positions.
//
// A split context is cut into aligned partitions: partition z covers positions [z * part_size, (z + 1) *
// part_size). A row's partitions are those from the one holding its first visible position (attn_row_lo) to the one
// holding its last, and its workspace cells are numbered from the first of them: cell c is partition
// attn_row_lo / part_size + c. A launch's blockIdx.z counts from the first partition of the block's row (SIMT) or
// row group (tensor cores: the group's lowest first visible position), so blocks below every window are never
// launched and the table entries there (-1 once released, model-checks.h) are never read. Without a window every
// row starts at 0 and all of this is the unwindowed layout.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention-rows.h"

namespace engine::cuda {

// model-config.h's effective_window (a host function): the smaller of the layer's window and the sequence's cap
// where non-zero, 0 when neither is.
__device__ __forceinline__ int attn_window(int layer_window, int cap) {
  if (layer_window <= 0) return cap > 0 ? cap : 0;
  return cap > 0 && cap < layer_window ? cap : layer_window;
}

// The first position `row` attends to: the window's W positions end at its own (ctx - 1), so ctx - W; 0 without a
// window.
__device__ __forceinline__ int attn_row_lo(const AttnRow& row, int layer_window) {
  const int w = attn_window(layer_window, row.window);
  return w > 0 && row.ctx > w ? row.ctx - w : 0;
}

// The merge's count of a row's partitions (cells 0 .. this - 1).
__device__ __forceinline__ int attn_row_parts(const AttnRow& row, int layer_window, int part_size) {
  return (row.ctx + part_size - 1) / part_size - attn_row_lo(row, layer_window) / part_size;
}

// Gemma 2's soft-capping of a scaled score x (cap > 0): cap * tanh(x / cap).
__device__ __forceinline__ float attn_soft_cap(float x, float cap) { return cap * tanhf(x / cap); }

}  // namespace engine::cuda
