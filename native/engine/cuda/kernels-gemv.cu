// The decode-shaped matrix product y = x · wᵀ for a few activation rows (one per sequence of a small batch). Such a
// product is bound by reading the weight once: each warp streams R weight rows with 16-byte loads, U chunks in
// flight, multiplies them with all M activation rows (small, served from L1), and reduces with shuffles. A matrix
// with few rows (o_proj, down_proj, qkv of an 8B model: 4-6k) would give too few warps to keep the memory busy, so
// KS warps of a block share a row pair, each streaming 1/KS of k, and add their sums through shared memory.
#include "cuda-check.h"
#include "dtype.cuh"
#include "kernels.h"
#include "pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;  // R
constexpr int kUnroll = 4;       // U: 16-byte chunks per weight row in flight
constexpr int kChunk = 8;        // elements per 16-byte load

template <typename T>
__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[kChunk]) {
  const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) out[i] = to_float(v[i]);
}

template <typename T, int M, typename OutT, int KS>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, OutT* y,
                                                           int64_t n, int64_t k, int64_t ldy, bool accumulate) {
  __shared__ float partial[KS > 1 ? kWarps : 1][kRowsPerWarp][M];
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

  float acc[kRowsPerWarp][M];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0;

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
      float wf[kRowsPerWarp][kChunk];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) unpack<T>(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kChunk];
        unpack<T>(__ldg(reinterpret_cast<const uint4*>(x + m * k + kk)), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
          for (int i = 0; i < kChunk; ++i) acc[r][m] += wf[r][i] * xf[i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], o);
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int m = 0; m < M; ++m) partial[warp][r][m] = acc[r][m];
    __syncthreads();
    if (part != 0 || n0 >= n) return;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float sum = 0;
#pragma unroll
        for (int p = 0; p < KS; ++p) sum += partial[warp + p][r][m];
        acc[r][m] = sum;
      }
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
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

template <typename T, typename OutT, int M, int KS>
void launch_ks(int64_t n, int64_t k, const void* x, const void* w, void* y, int64_t ldy, bool accumulate,
               cudaStream_t s) {
  const int64_t per_block = (kWarps / KS) * kRowsPerWarp;
  const unsigned blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  launch_pdl(gemv_kernel<T, M, OutT, KS>, dim3(blocks), dim3(kWarps * 32), s, static_cast<const T*>(x),
             static_cast<const T*>(w), static_cast<OutT*>(y), n, k, ldy, accumulate);
}

// About 1,000 blocks of 4 warps (8 per SM) keep enough loads in flight; fewer rows than that split k instead.
constexpr int64_t kWantBlocks = 1024;
template <typename T, typename OutT, int M>
void launch_m(int64_t n, int64_t k, const void* x, const void* w, void* y, int64_t ldy, bool accumulate, cudaStream_t s) {
  const int64_t rows_per_block = kWarps * kRowsPerWarp;
  if (n / rows_per_block >= kWantBlocks || k < 2048)
    launch_ks<T, OutT, M, 1>(n, k, x, w, y, ldy, accumulate, s);
  else if (2 * n / rows_per_block >= kWantBlocks || k < 4096)
    launch_ks<T, OutT, M, 2>(n, k, x, w, y, ldy, accumulate, s);
  else
    launch_ks<T, OutT, M, 4>(n, k, x, w, y, ldy, accumulate, s);
}

template <typename T, typename OutT>
void launch(int64_t m, int64_t n, int64_t k, const void* x, const void* w, void* y, int64_t ldy, bool accumulate,
            cudaStream_t s) {
  switch (m) {
    case 1: launch_m<T, OutT, 1>(n, k, x, w, y, ldy, accumulate, s); break;
    case 2: launch_m<T, OutT, 2>(n, k, x, w, y, ldy, accumulate, s); break;
    case 3: launch_m<T, OutT, 3>(n, k, x, w, y, ldy, accumulate, s); break;
    case 4: launch_m<T, OutT, 4>(n, k, x, w, y, ldy, accumulate, s); break;
    case 5: launch_m<T, OutT, 5>(n, k, x, w, y, ldy, accumulate, s); break;
    case 6: launch_m<T, OutT, 6>(n, k, x, w, y, ldy, accumulate, s); break;
    case 7: launch_m<T, OutT, 7>(n, k, x, w, y, ldy, accumulate, s); break;
    default: launch_m<T, OutT, 8>(n, k, x, w, y, ldy, accumulate, s); break;
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
  if (y_is_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, float>(m, n, k, x, w, y, ldy, accumulate, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, T>(m, n, k, x, w, y, ldy, accumulate, s)));
  }
  check_launch("gemv");
}

}  // namespace engine::cuda
