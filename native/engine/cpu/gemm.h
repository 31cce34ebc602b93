// The one matrix product the CPU models need: activations times a weight stored as [out, in] (Hugging Face's
// nn.Linear layout), so every projection of an iteration is a single call over all its tokens.
#pragma once
#include <cstdint>

namespace engine::cpu {

// y[m, n] = x[m, k] · w[n, k]ᵀ, or y += that when `accumulate` (residual adds and pre-filled biases ride on it).
// Row strides (elements): ldx for x, k for w, ldy for y.
void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy,
              bool accumulate);

// Threads for OpenMP kernels and for BLAS. n <= 0: all cores. OpenMP's setting is per calling thread, so the
// model calls this again on whatever thread runs forward().
void set_num_threads(int n);

}  // namespace engine::cpu
