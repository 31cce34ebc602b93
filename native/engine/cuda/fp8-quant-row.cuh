// One row of 16-bit values quantized to e4m3 by one thread block (quantize_e4m3's modes, kernels.h's Fp8Quant):
// the separate quantize pass (kernels-fp8.cu) and the kernels that produce an FP8 GEMM's activations and quantize
// them in the same launch (norm_e4m3, gated_activation_e4m3 in kernels-elementwise.cu) share it, so both give the
// very same bytes and scales.
#pragma once
#include <cstdlib>
#include <string>
#include <type_traits>

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

namespace engine::cuda {

// TRTLLM_FP8_ROW_REGS=0: the kernels that quantize rows (the norm / gated activation's fused quantization, the
// separate pass) read them back from memory as before (the register kernels are measured against that,
// bench/RESULTS.md).
inline bool fp8_row_regs() {
  static const bool on = [] {
    const char* v = std::getenv("TRTLLM_FP8_ROW_REGS");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// Whether quantize_regs can quantize a row held as vectors of W values a thread in `mode`: a group must be whole
// vectors of lanes of one warp (a power-of-two number of vectors up to 32, and a block's sweep of the row ending
// on a group boundary).
__host__ __device__ inline bool quantize_regs_fits(Fp8Quant mode, int32_t group, int W, int threads) {
  if (mode != Fp8Quant::group) return true;
  if (group <= 0 || group % W != 0) return false;
  const int lanes = group / W;
  return lanes <= 32 && (lanes & (lanes - 1)) == 0 && (threads * W) % group == 0;
}

// The register kernels' launch for `vectors` 16-byte vectors a thread (1 to 8), known at run time:
// go(std::integral_constant<int, K>{}) with K the next of 1, 2, 4, 8.
template <typename F>
inline void with_row_vectors(int64_t vectors, F&& go) {
  if (vectors <= 1) go(std::integral_constant<int, 1>{});
  else if (vectors <= 2) go(std::integral_constant<int, 2>{});
  else if (vectors <= 4) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
}

// quantize_row for a row the block holds in registers: thread t's vector k is columns [(k * blockDim.x + t) * W,
// + W) and holds their values as rounded to the row's 16-bit type (what quantize_row would read back); vectors at
// or past `cols` are skipped (cols % W == 0). The very bytes and scales quantize_row gives (a max does not depend
// on its order; each byte is the same division), without reading the row back from memory, in one round of
// stores of W bytes. Every thread of the block calls it; mode group needs quantize_regs_fits. qr aligned to W.
template <int K, int W>
__device__ __forceinline__ void quantize_regs(const float (&v)[K][W], int64_t cols, Fp8Quant mode, int32_t group,
                                              float fixed, uint8_t* __restrict__ qr, float* __restrict__ scales,
                                              int64_t scale_ld, int64_t r) {
  static_assert(W == 4 || W == 8, "4 or 8 bytes a store");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float s[K];
  if (mode == Fp8Quant::group) {
    const int lanes = group / W;  // a power of two up to 32: the group's vectors are those lanes of one warp
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t col = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * W;
      float amax = 0.0f;
      if (col < cols) {
#pragma unroll
        for (int e = 0; e < W; ++e) amax = fmaxf(amax, fabsf(v[k][e]));
      }
      for (int o = lanes / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      s[k] = quant_scale_for(amax);
      if (col < cols && lane % lanes == 0) scales[(col / group) * scale_ld + r] = s[k];
    }
  } else {
    float row_s = fixed;
    if (mode == Fp8Quant::row) {
      __shared__ float part[32];
      float amax = 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t col = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * W;
        if (col >= cols) continue;
#pragma unroll
        for (int e = 0; e < W; ++e) amax = fmaxf(amax, fabsf(v[k][e]));
      }
      amax = quant_warp_max(amax);
      if (lane == 0) part[warp] = amax;
      __syncthreads();
      amax = lane < warps ? part[lane] : 0.0f;
      row_s = quant_scale_for(quant_warp_max(amax));
    }
    if (threadIdx.x == 0) scales[r] = row_s;
#pragma unroll
    for (int k = 0; k < K; ++k) s[k] = row_s;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t col = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * W;
    if (col >= cols) continue;
    uint8_t b[W];
#pragma unroll
    for (int e = 0; e < W; ++e) b[e] = to_e4m3(v[k][e] / s[k]);
    if constexpr (W == 8) {
      uint2 raw;
      raw.x = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
      raw.y = b[4] | (b[5] << 8) | (b[6] << 16) | (static_cast<uint32_t>(b[7]) << 24);
      *reinterpret_cast<uint2*>(qr + col) = raw;
    } else {
      *reinterpret_cast<uint32_t*>(qr + col) = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    }
  }
}

}  // namespace engine::cuda
