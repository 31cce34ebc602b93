// One row of 16-bit values quantized to e4m3 by one thread block (quantize_e4m3's modes, kernels.h's Fp8Quant):
// the separate quantize pass (kernels-fp8.cu) and the kernels that produce an FP8 GEMM's activations and quantize
// them in the same launch (norm_e4m3, gated_activation_e4m3 in kernels-elementwise.cu) share it, so both give the
// very same bytes and scales.
#pragma once
#include "cuda/dtype.cuh"
#include "cuda/kernels.h"
#include "cuda/kv-element.cuh"

namespace engine::cuda {

constexpr float kE4m3Max = 448.0f;

__device__ __forceinline__ float quant_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float quant_scale_for(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }

// Row r (xr, `cols` values) into qr with its scale(s): row / fixed: the block's threads stride over the row (a
// block-wide max for `row`); group: each warp takes whole groups, one max per group (scales[g * scale_ld + r]).
// Every thread of the block calls it; the row must be visible to all of them (written before a barrier).
template <typename T>
__device__ __forceinline__ void quantize_row(const T* __restrict__ xr, int64_t cols, Fp8Quant mode, int32_t group,
                                             float fixed, uint8_t* __restrict__ qr, float* __restrict__ scales,
                                             int64_t scale_ld, int64_t r) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  if (mode == Fp8Quant::group) {
    const int64_t groups = (cols + group - 1) / group;
    for (int64_t g = warp; g < groups; g += warps) {
      const int64_t c0 = g * group, c1 = min(cols, c0 + group);
      float amax = 0.0f;
      for (int64_t c = c0 + lane; c < c1; c += 32) amax = fmaxf(amax, fabsf(to_float(xr[c])));
      const float s = quant_scale_for(quant_warp_max(amax));
      if (lane == 0) scales[g * scale_ld + r] = s;
      for (int64_t c = c0 + lane; c < c1; c += 32) qr[c] = to_e4m3(to_float(xr[c]) / s);
    }
    return;
  }
  float s = fixed;
  if (mode == Fp8Quant::row) {
    __shared__ float part[32];
    float amax = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) amax = fmaxf(amax, fabsf(to_float(xr[c])));
    amax = quant_warp_max(amax);
    if (lane == 0) part[warp] = amax;
    __syncthreads();
    amax = lane < warps ? part[lane] : 0.0f;
    s = quant_scale_for(quant_warp_max(amax));
  }
  if (threadIdx.x == 0) scales[r] = s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) qr[c] = to_e4m3(to_float(xr[c]) / s);
}

}  // namespace engine::cuda
