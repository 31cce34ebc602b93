// Greedy sampling on the GPU: per row, the argmax (lowest id among equal maxima, as the host sampler) and its
// log-softmax, so a greedy decode step copies two numbers per sequence to the host instead of a vocab of logits.
#include <cfloat>

#include "cuda-check.h"
#include "kernels.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 1024;

// (value, index) max with the lower index winning ties; NaN never wins (the host sampler turns NaN into -inf).
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov != ov) return;
  if (v != v || ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void __launch_bounds__(kThreads) greedy_kernel(const float* logits, const int32_t* rows_idx, int64_t vocab,
                                                          int32_t* token, float* log_prob) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ float ssum[32];
  const float* row = logits + static_cast<int64_t>(rows_idx[blockIdx.x]) * vocab;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v = -INFINITY;
  int idx = INT_MAX;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) better(v, idx, row[t], static_cast<int>(t));
  for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? sv[lane] : -INFINITY;
    idx = lane < kThreads / 32 ? si[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    if (lane == 0) {
      sv[0] = v;
      si[0] = idx;
    }
  }
  __syncthreads();
  const float mx = sv[0];
  const int best = si[0] == INT_MAX ? 0 : si[0];
  if (mx == -INFINITY) {  // every entry -inf or NaN: the host sampler returns token 0 (or the first) with -inf
    if (threadIdx.x == 0) {
      token[blockIdx.x] = best;
      log_prob[blockIdx.x] = -INFINITY;
    }
    return;
  }
  float sum = 0;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) {
    const float x = row[t];
    if (x == x) sum += expf(x - mx);
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) ssum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += ssum[w];
    token[blockIdx.x] = best;
    log_prob[blockIdx.x] = -logf(total);
  }
}

}  // namespace

void greedy_sample(const float* logits, const int32_t* rows_idx, int32_t n, int64_t vocab, int32_t* token,
                   float* log_prob, cudaStream_t s) {
  if (n == 0) return;
  greedy_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(logits, rows_idx, vocab, token, log_prob);
  check_launch("greedy_sample");
}

}  // namespace engine::cuda
