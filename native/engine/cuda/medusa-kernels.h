// The kernels of Medusa heads on the GPU (cuda-decoder-medusa.cpp): the rows the executor asks for gathered, each
// residual block's x + SiLU(W x + b) after its product, and each head's best tokens out of its vocabulary row.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace engine::cuda {

// The most tokens medusa_top_k keeps a row (medusa-tree.h's kMedusaTopK is 10).
inline constexpr int32_t kMedusaMaxTopK = 16;

// dst[i] = src[rows_idx[i]], rows of n elements of the model dtype.
void gather_rows_dt(const void* src, DType dt, const int32_t* rows_idx, void* dst, int64_t rows, int64_t n,
                    cudaStream_t s);
// x[r, d] += silu(t[r, d] + b[d]) for rows of n: x of the model dtype, t and b fp32 (b null: none).
void medusa_residual(void* x, DType dt, const float* t, const float* b, int64_t rows, int64_t n, cudaStream_t s);
// For each of `rows` rows of `vocab` logits (row stride ld): its k best ids, best first, the lower id first among
// equal values (the CPU heads' order), -1 past the vocabulary; into out[row * k ..]. k <= kMedusaMaxTopK.
void medusa_top_k(const float* logits, int64_t rows, int64_t vocab, int64_t ld, int32_t k, int32_t* out,
                  cudaStream_t s);

}  // namespace engine::cuda
