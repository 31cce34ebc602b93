// How one key / value element sits in the paged pools (KvFormat, kernels.h): the model dtype T, or
// (--kv-cache-dtype fp8) an e4m3fn byte of x / scale. The attention kernels read e4m3 elements as their exact
// values in T (every e4m3 number is a bf16 and an fp16 number) and fold the layer's scales into the score
// multiplier (k) and the output (v), so reading FP8 adds no rounding of its own.
#pragma once
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/dtype.cuh"

namespace engine::cuda {

// Round to nearest even, saturating at +-448 (quant/fp8-matrix.h's encode_e4m3).
__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ float e4m3_to_float(uint8_t v) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(v, __NV_E4M3);
  return __half2float(__half(h));
}

// The pool's element type: T, or one byte.
template <typename T, bool F8>
using KvStore = std::conditional_t<F8, uint8_t, T>;

// x as the pool stores it; `inv` is 1 / the layer's scale (fp8 only).
template <typename T, bool F8>
__device__ __forceinline__ KvStore<T, F8> kv_encode(float x, float inv) {
  if constexpr (F8) {
    return to_e4m3(x * inv);
  } else {
    return from_float<T>(x);
  }
}

// N stored elements at p (N * sizeof(element) bytes, aligned to that) as floats, unscaled.
template <typename S, int N>
__device__ __forceinline__ void kv_load(const S* p, float (&out)[N]) {
  if constexpr (std::is_same_v<S, uint8_t>) {
    static_assert(N == 4 || N == 8, "fp8 loads of 4 or 8 elements");
    uint8_t b[N];
    if constexpr (N == 8) {
      *reinterpret_cast<uint2*>(b) = *reinterpret_cast<const uint2*>(p);
    } else {
      *reinterpret_cast<uint32_t*>(b) = *reinterpret_cast<const uint32_t*>(p);
    }
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(b[i] | (b[i + 1] << 8)),
                                                       __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      out[i] = f.x;
      out[i + 1] = f.y;
    }
  } else {
    static_assert(N == 4 || N == 8, "16-bit loads of 4 or 8 elements");
    S v[N];
    if constexpr (N == 8) {
      *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p);
    } else {
      *reinterpret_cast<uint2*>(v) = *reinterpret_cast<const uint2*>(p);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_float(v[i]);
  }
}

// 16 e4m3 bytes (one 16-byte vector) into 16 elements of T at dst (32 bytes, 16-byte aligned), exactly.
template <typename T>
__device__ __forceinline__ void e4m3x16_to(const uint4& raw, T* dst) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  T out[16];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[j] >> (16 * i)),
                                                       __NV_E4M3);
      if constexpr (std::is_same_v<T, __half>) {
        const __half2 v(h);
        out[4 * j + 2 * i] = v.x;
        out[4 * j + 2 * i + 1] = v.y;
      } else {
        const float2 f = __half22float2(__half2(h));
        out[4 * j + 2 * i] = from_float<T>(f.x);
        out[4 * j + 2 * i + 1] = from_float<T>(f.y);
      }
    }
  reinterpret_cast<uint4*>(dst)[0] = reinterpret_cast<const uint4*>(out)[0];
  reinterpret_cast<uint4*>(dst)[1] = reinterpret_cast<const uint4*>(out)[1];
}

}  // namespace engine::cuda
