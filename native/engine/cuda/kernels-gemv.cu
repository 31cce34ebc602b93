// The decode-shaped matrix product y = x · wᵀ for a few activation rows (one per sequence of a small batch). Such a
// product is bound by reading the weight once: each warp streams R weight rows with 16-byte loads, U chunks in
// flight, multiplies them with all M activation rows (small, served from L1), and reduces with shuffles. A matrix
// with few rows (o_proj, down_proj, qkv of an 8B model: 4-6k) would give too few warps to keep the memory busy, so
// KS warps of a block share a row pair, each streaming 1/KS of k, and add their sums through shared memory.
// The RMSNorm in front of a projection can ride along (gemv_rms), saving the norm kernel and its hand-off: x is
// then the fp32 residual stream, every warp scales its chunk of x by the norm weight as it loads it and sums its
// squares on the way, and the row's 1 / rms multiplies the finished dot products.
#include <type_traits>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/gemv-common.cuh"
#include "cuda/kernels.h"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {
using namespace gemv_common;

// XT: T (x as given) or float (x the residual stream, normalised on the fly with norm_w, eps: gemv_rms).
template <typename T, typename XT, int M, typename OutT, int KS>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const XT* __restrict__ x, const T* __restrict__ w, OutT* y, int64_t n, int64_t k, int64_t ldy,
                bool accumulate, const float* __restrict__ norm_w, float eps) {
  constexpr bool kNorm = std::is_same_v<XT, float>;
  __shared__ PartialSums<XT, M, KS> partial;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = warp % KS;  // which 1/KS of k this warp streams
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / KS) + warp / KS) * kRowsPerWarp;
  // k split on 256-element boundaries (a warp's chunk), so every part starts 16-byte aligned.
  const int64_t span = ((k + KS * 256 - 1) / (KS * 256)) * 256;
  const int64_t k_begin = part * span, k_end = min(k, k_begin + span);
  if (KS == 1 && n0 >= n) return;
  const T* rows[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) rows[r] = w + (n0 + r < n ? n0 + r : n0) * k;

  // The weights are read-only: their first rows go towards L2 before the previous kernel has finished (pdl.cuh).
  if (n0 < n) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = k_begin + lane * kChunk + u * 32 * kChunk;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        if (kk < k_end) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + kk));
    }
  }
  pdl_wait();
  pdl_trigger();

  float acc[kRowsPerWarp][M], ss[M];  // ss: sums of squares of x (kNorm)
#pragma unroll
  for (int m = 0; m < M; ++m) {
    ss[m] = 0;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[r][m] = 0;
  }

  constexpr int64_t step = 32 * kChunk;  // elements a warp covers per chunk
  for (int64_t base = k_begin + lane * kChunk; n0 < n && base < k_end; base += step * kUnroll) {
    uint4 wv[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = base + u * step;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        wv[u][r] = kk < k_end ? __ldcs(reinterpret_cast<const uint4*>(rows[r] + kk)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = base + u * step;
      if (kk >= k_end) break;
      float wf[kRowsPerWarp][kChunk], g[kChunk];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) unpack<T>(wv[u][r], wf[r]);
      if constexpr (kNorm) load_chunk(norm_w + kk, g);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kChunk];
        load_chunk(x + m * k + kk, xf);
        if constexpr (kNorm) {
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            ss[m] += xf[i] * xf[i];
            xf[i] *= g[i];
          }
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
          for (int i = 0; i < kChunk; ++i) acc[r][m] += wf[r][i] * xf[i];
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], o);
    if constexpr (kNorm)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss[m] += __shfl_xor_sync(0xffffffffu, ss[m], o);
  }
  finish_rows<XT, M, OutT, KS>(acc, ss, partial, y, n, k, ldy, accumulate, eps, n0, warp, part, lane);
}

// What a launch carries besides the shapes: x (T, or the fp32 residual stream when norm_w is set) and the output.
struct GemvArgs {
  const void* x;
  const void* w;
  void* y;
  int64_t ldy;
  bool accumulate;
  const float* norm_w;  // RMSNorm weight [k] (gemv_rms) or null
  float eps;
};

template <typename T, typename OutT, int M, int KS>
void launch_ks(int64_t n, int64_t k, const GemvArgs& a, cudaStream_t s) {
  const int64_t per_block = (kWarps / KS) * kRowsPerWarp;
  const unsigned blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  if (a.norm_w != nullptr)
    launch_pdl(gemv_kernel<T, float, M, OutT, KS>, dim3(blocks), dim3(kWarps * 32), s,
               static_cast<const float*>(a.x), static_cast<const T*>(a.w), static_cast<OutT*>(a.y), n, k, a.ldy,
               a.accumulate, a.norm_w, a.eps);
  else
    launch_pdl(gemv_kernel<T, T, M, OutT, KS>, dim3(blocks), dim3(kWarps * 32), s, static_cast<const T*>(a.x),
               static_cast<const T*>(a.w), static_cast<OutT*>(a.y), n, k, a.ldy, a.accumulate, nullptr, 0.0f);
}

// Two warps per row pair once k is long enough (>= 2,048): twice the warps in flight for matrices with few rows
// (o_proj, down_proj, qkv of an 8B model: 4-6k), and blocks half as long for the wide ones (gate / up, LM head),
// which shortens the tail of the last wave. Measured on an H200 against the earlier choice (4 warps per pair for
// 4-6k rows, 1 for >= 8k rows): a batch-1 decode step of the Llama-3-8B shape 0.02-0.06 ms faster, 4 warps per
// pair everywhere 0.17 ms slower.
template <typename T, typename OutT, int M>
void launch_m(int64_t n, int64_t k, const GemvArgs& a, cudaStream_t s) {
  if (k < 2048)
    launch_ks<T, OutT, M, 1>(n, k, a, s);
  else
    launch_ks<T, OutT, M, 2>(n, k, a, s);
}

template <typename T, typename OutT>
void launch(int64_t m, int64_t n, int64_t k, const GemvArgs& a, cudaStream_t s) {
  with_rows(m, [&](auto rows) { launch_m<T, OutT, decltype(rows)::value>(n, k, a, s); });
}

void dispatch(int64_t m, int64_t n, int64_t k, const GemvArgs& a, DType dt, bool y_is_f32, cudaStream_t s) {
  if (y_is_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, float>(m, n, k, a, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, T>(m, n, k, a, s)));
  }
}

}  // namespace

void set_pdl(bool on) { pdl_state().store(on ? 1 : 0); }
bool pdl_on() { return pdl_enabled(); }

bool gemv_applicable(int64_t m, int64_t k) { return m >= 1 && m <= kGemvMaxRows && k % kChunk == 0; }

void gemv(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_is_f32, int64_t ldy,
          bool accumulate, cudaStream_t s) {
  if (!gemv_applicable(m, k))
    throw EngineError(ErrorCode::internal, "gemv called with m " + std::to_string(m) + ", k " + std::to_string(k));
  if (n == 0) return;
  dispatch(m, n, k, GemvArgs{x, w, y, ldy, accumulate, nullptr, 0.0f}, dt, y_is_f32, s);
  check_launch("gemv");
}

void gemv_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const void* w, DType dt,
              void* y, bool y_is_f32, int64_t ldy, cudaStream_t s) {
  if (!gemv_applicable(m, k) || norm_w == nullptr)
    throw EngineError(ErrorCode::internal, "gemv_rms called with m " + std::to_string(m) + ", k " + std::to_string(k));
  if (n == 0) return;
  dispatch(m, n, k, GemvArgs{x, w, y, ldy, false, norm_w, eps}, dt, y_is_f32, s);
  check_launch("gemv_rms");
}

}  // namespace engine::cuda
