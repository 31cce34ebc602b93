// The shrink's outputs are partial sums over slices of kLoraKSlice input columns (lora-kernels.h); the expands
// (kernels-lora.cu, kernels-lora-wide.cu) add them up with this.
#pragma once
#include <cstdint>

namespace engine::cuda {

// Σ over the shrink's k slices of one value, the first 8 slices' loads issued together (a runtime-bounded loop would
// wait for each in turn: the down projection of the 8B shape has 7).
__device__ __forceinline__ float sum_slices(const float* p, int32_t slices, int64_t stride) {
  float v[8];
#pragma unroll
  for (int z = 0; z < 8; ++z) v[z] = z < slices ? p[z * stride] : 0.0f;
  float sum = 0;
#pragma unroll
  for (int z = 0; z < 8; ++z) sum += v[z];
  for (int z = 8; z < slices; ++z) sum += p[z * stride];
  return sum;
}

}  // namespace engine::cuda
