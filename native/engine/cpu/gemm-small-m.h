// The decode-shaped matrix product: few activation rows (one per sequence in the batch) against a large weight.
// Such a step is bound by reading the weight from memory once; a general GEMM packs (copies) the weight first,
// which triples the memory traffic. This kernel streams each weight row once and keeps the few activation rows
// in L1.
#pragma once
#include <cstdint>

namespace engine::cpu {

// Largest m the small-m kernel is used for; above it packing pays off and BLAS wins.
constexpr int64_t kSmallM = 16;

// y[m, n] (+)= x[m, k] · w[n, k]ᵀ for columns [n0, n1) only (callers split columns across threads).
void gemm_xwt_small_m(int64_t m, int64_t n0, int64_t n1, int64_t k, const float* x, int64_t ldx, const float* w,
                      float* y, int64_t ldy, bool accumulate);

}  // namespace engine::cpu
