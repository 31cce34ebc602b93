// Device-side conversions between the model dtype (bf16 / fp16) and fp32, and dispatch on DType.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/kernels.h"

namespace engine::cuda {

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }

}  // namespace engine::cuda

// Runs the statement with `T` bound to the element type of `dt`.
#define ENGINE_DISPATCH_DTYPE(dt, ...)            \
  do {                                            \
    if ((dt) == ::engine::cuda::DType::bf16) {    \
      using T = __nv_bfloat16;                    \
      __VA_ARGS__;                                \
    } else {                                      \
      using T = __half;                           \
      __VA_ARGS__;                                \
    }                                             \
  } while (0)
