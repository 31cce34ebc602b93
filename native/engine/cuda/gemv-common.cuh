// What the decode GEMVs share (kernels-gemv.cu: weights in the model dtype; kernels-fp8.cu: e4m3 weights): the
// launch geometry (a block of kWarps warps, each streaming kRowsPerWarp weight rows, kUnroll 16-byte loads per
// row in flight), loading 8 activations as floats, and the end of a warp's rows (the k parts' sums meeting in
// shared memory, the fused RMSNorm's 1 / rms, the store).
#pragma once
#include <type_traits>

#include "cuda/dtype.cuh"

namespace engine::cuda::gemv_common {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;  // R
constexpr int kUnroll = 4;       // U: 16-byte chunks per weight row in flight
constexpr int kChunk = 8;        // 16-bit elements (weights, activations) per 16-byte load

template <typename T>
__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[kChunk]) {
  const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) out[i] = to_float(v[i]);
}

__device__ __forceinline__ void load_chunk(const float* p, float (&out)[kChunk]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[kChunk]) {
  unpack<T>(__ldg(reinterpret_cast<const uint4*>(p)), out);
}

// Shared memory for the k parts' sums: [warps][this warp's rows (+ the sum of squares, gemv_rms)][M].
template <typename XT, int M, int KS, int R = kRowsPerWarp>
using PartialSums = float[KS > 1 ? kWarps : 1][R + (std::is_same_v<XT, float> ? 1 : 0)][M];

// The end of a warp's rows: with KS > 1 the k parts' sums (and sums of squares) meet in shared memory (`partial`)
// and the part-0 warp finishes; kNorm: the rms scaling; then y (+= with accumulate) from lane 0.
template <typename XT, int M, typename OutT, int KS, int R = kRowsPerWarp>
__device__ __forceinline__ void finish_rows(float (&acc)[R][M], float (&ss)[M],
                                            PartialSums<XT, M, KS, R>& partial, OutT* y, int64_t n, int64_t k,
                                            int64_t ldy, bool accumulate, float eps, int64_t n0, int warp, int part,
                                            int lane) {
  constexpr bool kNorm = std::is_same_v<XT, float>;
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < M; ++m) {
#pragma unroll
        for (int r = 0; r < R; ++r) partial[warp][r][m] = acc[r][m];
        if constexpr (kNorm) partial[warp][R][m] = ss[m];
      }
    __syncthreads();
    if (part != 0 || n0 >= n) return;
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float sum = 0;
#pragma unroll
        for (int p = 0; p < KS; ++p) sum += partial[warp + p][r][m];
        acc[r][m] = sum;
      }
      if constexpr (kNorm) {
        float sum = 0;
#pragma unroll
        for (int p = 0; p < KS; ++p) sum += partial[warp + p][R][m];
        ss[m] = sum;
      }
    }
  }
  if constexpr (kNorm)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      // The same 1 / rms as the norm kernel (kernels-elementwise.cu).
      const float inv = 1.0f / sqrtf(ss[m] / static_cast<float>(k) + eps);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][m] *= inv;
    }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (n0 + r >= n) break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        OutT* dst = y + m * ldy + n0 + r;
        const float prev = accumulate ? to_float(*dst) : 0.0f;
        *dst = from_float<OutT>(prev + acc[r][m]);
      }
    }
  }
}

// The launch for a row count known only at run time: fn(std::integral_constant<int, M>{}) with M = m for m in
// 1..7, else 8 (kGemvMaxRows), so each GEMV instantiates its kernels for every decode batch size once.
template <typename Fn>
void with_rows(int64_t m, Fn&& fn) {
  switch (m) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 5: fn(std::integral_constant<int, 5>{}); break;
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 7: fn(std::integral_constant<int, 7>{}); break;
    default: fn(std::integral_constant<int, 8>{}); break;
  }
}

}  // namespace engine::cuda::gemv_common
