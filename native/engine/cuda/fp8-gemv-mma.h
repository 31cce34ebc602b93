// What kernels-fp8.cu (the decode GEMV's entry points) needs of kernels-fp8-mma.cu (the tensor-core FP8 GEMV).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace engine::cuda {

// Whether the tensor-core kernel serves this product: up to 8 rows, k a multiple of 64, block scales (if any) on
// 64-column boundaries; and not switched off (TRTLLM_FP8_GEMV_MMA=0).
bool gemv_fp8_mma_applicable(int64_t m, int64_t k, const Fp8Weight& w);
// gemv_fp8 (norm_w null) or gemv_fp8_rms (norm_w set: x is the fp32 residual stream, normalised on the fly; the
// normalised row enters the MMA rounded to the model dtype, as the norm kernel's output would).
void gemv_fp8_mma(int64_t m, int64_t n, int64_t k, const void* x, const float* norm_w, float eps, const Fp8Weight& w,
                  DType dt, void* y, bool y_is_f32, int64_t ldy, bool accumulate, cudaStream_t s);

}  // namespace engine::cuda
