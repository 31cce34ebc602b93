// medusa-kernels.h. The top-k is one block a row: each thread keeps its own sorted best k of a strided share of
// the row in registers, then k rounds pick the block's best head of those lists (a warp reduction, then one across
// the warps) and pop it — the vocabulary is read once, and k is small.
#include <algorithm>
#include <climits>
#include <string>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/medusa-kernels.h"

namespace engine::cuda {
namespace {

constexpr int kTopKThreads = 256;

template <typename T>
__global__ void gather_kernel(const T* src, const int32_t* rows_idx, T* dst, int64_t n) {
  const T* from = src + static_cast<int64_t>(rows_idx[blockIdx.y]) * n;
  T* to = dst + static_cast<int64_t>(blockIdx.y) * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    to[i] = from[i];
}

template <typename T>
__global__ void residual_kernel(T* x, const float* t, const float* b, int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = t[i] + (b != nullptr ? b[i % n] : 0.0f);
    x[i] = from_float<T>(to_float(x[i]) + v / (1.0f + expf(-v)));
  }
}

// (value, id) a beats (value, id) b: larger, or equal with the lower id. NaN never beats anything.
__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi) {
  return av > bv || (av == bv && ai < bi);
}

template <int K>
__global__ void __launch_bounds__(kTopKThreads) top_k_kernel(const float* logits, int64_t vocab, int64_t ld, int k,
                                                             int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * ld;
  float v[K];
  int id[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    v[j] = -INFINITY;
    id[j] = INT_MAX;
  }
  for (int64_t t = threadIdx.x; t < vocab; t += kTopKThreads) {
    const float x = row[t];
    const int i = static_cast<int>(t);
    if (!beats(x, i, v[K - 1], id[K - 1])) continue;
    // Insert into the sorted list (ids rise with t, so among equal values the earlier stays ahead).
    v[K - 1] = x;
    id[K - 1] = i;
#pragma unroll
    for (int j = K - 1; j > 0; --j) {
      if (!beats(v[j], id[j], v[j - 1], id[j - 1])) break;
      const float tv = v[j];
      const int ti = id[j];
      v[j] = v[j - 1];
      id[j] = id[j - 1];
      v[j - 1] = tv;
      id[j - 1] = ti;
    }
  }
  __shared__ float wv[kTopKThreads / 32];
  __shared__ int wi[kTopKThreads / 32];
  __shared__ int winner;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r = 0; r < k; ++r) {
    float bv = v[0];
    int bi = id[0];
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (beats(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) wv[warp] = bv, wi[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kTopKThreads / 32; ++w)
        if (beats(wv[w], wi[w], bv, bi)) bv = wv[w], bi = wi[w];
      out[static_cast<int64_t>(blockIdx.x) * k + r] = bi == INT_MAX ? -1 : bi;
      winner = bi;
    }
    __syncthreads();
    // The thread whose list held the winner pops it (ids are unique, so exactly one holds it at its head).
    if (winner != INT_MAX && id[0] == winner) {
#pragma unroll
      for (int j = 0; j + 1 < K; ++j) v[j] = v[j + 1], id[j] = id[j + 1];
      v[K - 1] = -INFINITY;
      id[K - 1] = INT_MAX;
    }
    __syncthreads();  // (wv / wi / winner are rewritten next round)
  }
}

}  // namespace

void gather_rows_dt(const void* src, DType dt, const int32_t* rows_idx, void* dst, int64_t rows, int64_t n,
                    cudaStream_t s) {
  if (rows == 0) return;
  const dim3 grid(std::min<unsigned>(blocks_for(n, 256), 64u), static_cast<unsigned>(rows));
  ENGINE_DISPATCH_DTYPE(dt, (gather_kernel<T><<<grid, 256, 0, s>>>(static_cast<const T*>(src), rows_idx,
                                                                   static_cast<T*>(dst), n)));
  check_launch("gather rows");
}

void medusa_residual(void* x, DType dt, const float* t, const float* b, int64_t rows, int64_t n, cudaStream_t s) {
  if (rows * n == 0) return;
  const unsigned grid = std::min<unsigned>(blocks_for(rows * n, 256), 1024u);
  ENGINE_DISPATCH_DTYPE(dt, (residual_kernel<T><<<grid, 256, 0, s>>>(static_cast<T*>(x), t, b, rows, n)));
  check_launch("Medusa residual block");
}

void medusa_top_k(const float* logits, int64_t rows, int64_t vocab, int64_t ld, int32_t k, int32_t* out,
                  cudaStream_t s) {
  if (rows == 0) return;
  if (k < 1 || k > kMedusaMaxTopK)
    throw EngineError(ErrorCode::internal, "medusa_top_k: k " + std::to_string(k) + " outside [1, " +
                                               std::to_string(kMedusaMaxTopK) + "]");
  // The lists are as long as k rounded up to 4 or 16 (registers: most heads keep 10).
  if (k <= 4)
    top_k_kernel<4><<<static_cast<unsigned>(rows), kTopKThreads, 0, s>>>(logits, vocab, ld, k, out);
  else if (k <= 10)
    top_k_kernel<10><<<static_cast<unsigned>(rows), kTopKThreads, 0, s>>>(logits, vocab, ld, k, out);
  else
    top_k_kernel<kMedusaMaxTopK><<<static_cast<unsigned>(rows), kTopKThreads, 0, s>>>(logits, vocab, ld, k, out);
  check_launch("Medusa top-k");
}

}  // namespace engine::cuda
