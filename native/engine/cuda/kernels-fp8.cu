// FP8 (e4m3fn) weights on the GPU: quantizing rows to e4m3 with their scales (weights per output channel at load,
// activations per token or per token-group before a cuBLASLt FP8 GEMM), widening a weight back to the model dtype
// for products no FP8 path serves, and the decode GEMV over e4m3 weights.
//
// The GEMV is kernels-gemv.cu's with one-byte weights: a 16-byte load brings 16 weights of a row, so the same
// bytes in flight cover twice the columns; the weights widen to fp32 by bit placement (unpack_e4m3). Per-row
// scales multiply the finished sums; block scales multiply each 16-column piece's partial sum (16 divides the
// block, so a piece never straddles two tiles).
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/fp8-gemv-mma.h"
#include "cuda/fp8-quant-row.cuh"
#include "cuda/gemv-common.cuh"
#include "cuda/kernels.h"
#include "cuda/kv-element.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {
using namespace gemv_common;

constexpr int kF8Chunk = 16;  // e4m3 weights per 16-byte load

// One block per row, the row read into registers with all its 16-byte loads in flight at once and quantized from
// there (fp8-quant-row.cuh): the pass before an FP8 GEMM whose input no kernel quantized (the attention output
// before o_proj). quantize_kernel below walked the row in 2-byte loads and read it back (~10 µs a batch-512 decode
// call of 4,096-wide rows on an H200, ~0.5 TB/s).
template <typename T, int K>
__global__ void __launch_bounds__(256)
    quantize_regs_kernel(const T* __restrict__ x, int64_t cols, Fp8Quant mode, int32_t group, float fixed,
                         uint8_t* __restrict__ q, float* __restrict__ scales, int64_t scale_ld) {
  pdl_enter();  // pdl.cuh
  const int64_t r = blockIdx.x;
  const T* xr = x + r * cols;
  uint4 raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t col = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * 8;
    if (col < cols) raw[k] = *reinterpret_cast<const uint4*>(xr + col);
  }
  float v[K][8];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const T* e = reinterpret_cast<const T*>(&raw[k]);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[k][i] = to_float(e[i]);
  }
  quantize_regs<K, 8>(v, cols, mode, group, fixed, q + r * cols, scales, scale_ld, r);
}

// One block per row (fp8-quant-row.cuh).
template <typename T>
__global__ void quantize_kernel(const T* __restrict__ x, int64_t cols, Fp8Quant mode, int32_t group, float fixed,
                                uint8_t* __restrict__ q, float* __restrict__ scales, int64_t scale_ld) {
  const int64_t r = blockIdx.x;
  quantize_row(x + r * cols, cols, mode, group, fixed, q + r * cols, scales, scale_ld, r);
}

template <typename T>
__global__ void add_to_f32_kernel(const T* __restrict__ src, int64_t rows, int64_t cols, float* y, int64_t ldy,
                                  bool accumulate) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float* dst = y + (i / cols) * ldy + i % cols;
    *dst = (accumulate ? *dst : 0.0f) + to_float(src[i]);
  }
}

__device__ __forceinline__ float weight_scale(const Fp8Weight& w, int64_t r, int64_t c) {
  return w.block == 0 ? w.scales[r] : w.scales[(r / w.block) * w.scale_ld + c / w.block];
}

template <typename T>
__global__ void dequantize_kernel(Fp8Weight w, int64_t n, int64_t k, T* __restrict__ out) {
  const int64_t total = n * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, c = i % k;
    out[i] = from_float<T>(e4m3_to_float(w.data[i]) * weight_scale(w, r, c));
  }
}

// 16 e4m3 weights as floats scaled by 2^-120, exactly, with integer ops only: each byte's sign goes to bit 31 and
// its 7 exponent and mantissa bits to bits 26..20, so the float's exponent field holds e4m3's (biased by 7 where
// fp32 expects 127: the 2^-120) and subnormals stay subnormal. The GEMV multiplies the 2^120 back into its sums.
// (cvt.rn.f16x2.e4m3x2 and a widening to fp32 would be exact too, but conversions issue at a quarter of the
// integer rate, which held the batch-1 GEMV to about half the copy bandwidth on an H100.)
constexpr float kE4m3Unbias = 0x1p120f;
__device__ __forceinline__ void unpack_e4m3(const uint4& raw, float (&out)[kF8Chunk]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // Two bytes at a time: the upper byte of each 16-bit half becomes that half's bf16 (its sign kept, its 7 low
    // bits moved down by 4); bytes 1 and 3 as they are, bytes 0 and 2 after a shift by 8. A bf16 in a word's
    // high half is already its float's bit pattern, one in the low half needs a shift by 16.
    const uint32_t odd = words[j], even = words[j] << 8;
    const uint32_t t1 = (odd & 0x80008000u) | ((odd >> 4) & 0x07f007f0u);
    const uint32_t t0 = (even & 0x80008000u) | ((even >> 4) & 0x07f007f0u);
    out[4 * j + 0] = __uint_as_float(t0 << 16);
    out[4 * j + 1] = __uint_as_float(t1 << 16);
    out[4 * j + 2] = __uint_as_float(t0 & 0xffff0000u);
    out[4 * j + 3] = __uint_as_float(t1 & 0xffff0000u);
  }
}

// 16 activations (or norm weights) as floats: two of the shared 8-element loads.
template <typename XT>
__device__ __forceinline__ void load16(const XT* p, float (&out)[kF8Chunk]) {
  float a[kChunk], b[kChunk];
  load_chunk(p, a);
  load_chunk(p + kChunk, b);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    out[i] = a[i];
    out[kChunk + i] = b[i];
  }
}

// XT: T (x as given) or float (the residual stream, normalised on the fly: gemv_fp8_rms). As gemv_kernel, with a
// warp covering 32 * 16 columns per load and k split between the KS parts on 512-column boundaries.
template <typename T, typename XT, int M, typename OutT, int KS, int R>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_fp8_kernel(const XT* __restrict__ x, Fp8Weight w, OutT* y, int64_t n, int64_t k, int64_t ldy,
                    bool accumulate, const float* __restrict__ norm_w, float eps) {
  constexpr bool kNorm = std::is_same_v<XT, float>;
  constexpr int64_t kStep = 32 * kF8Chunk;  // columns a warp covers per load
  __shared__ PartialSums<XT, M, KS, R> partial;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = warp % KS;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / KS) + warp / KS) * R;
  const int64_t span = ((k + KS * kStep - 1) / (KS * kStep)) * kStep;
  const int64_t k_begin = part * span, k_end = min(k, k_begin + span);
  if (KS == 1 && n0 >= n) return;
  const uint8_t* rows[R];
  int64_t row_of[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    row_of[r] = n0 + r < n ? n0 + r : n0;
    rows[r] = w.data + row_of[r] * k;
  }
  if (n0 < n) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = k_begin + lane * kF8Chunk + u * kStep;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (kk < k_end) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + kk));
    }
  }
  pdl_wait();
  pdl_trigger();

  float acc[R][M], ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    ss[m] = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][m] = 0;
  }
  const bool block = w.block != 0;
  const float* block_scales[R];  // this row's tile row of scales (block)
#pragma unroll
  for (int r = 0; r < R; ++r)
    block_scales[r] = block ? w.scales + (row_of[r] / w.block) * w.scale_ld : nullptr;

  for (int64_t base = k_begin + lane * kF8Chunk; n0 < n && base < k_end; base += kStep * kUnroll) {
    uint4 wv[kUnroll][R];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = base + u * kStep;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = kk < k_end ? __ldcs(reinterpret_cast<const uint4*>(rows[r] + kk)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = base + u * kStep;
      if (kk >= k_end) break;
      float wf[R][kF8Chunk], g[kF8Chunk], bs[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        unpack_e4m3(wv[u][r], wf[r]);
        bs[r] = block ? __ldg(block_scales[r] + kk / w.block) : 1.0f;
      }
      if constexpr (kNorm) {
        load16(norm_w + kk, g);
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kF8Chunk];
        load16(x + m * k + kk, xf);
        if constexpr (kNorm) {
#pragma unroll
          for (int i = 0; i < kF8Chunk; ++i) {
            ss[m] += xf[i] * xf[i];
            xf[i] *= g[i];
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d = 0.0f;
#pragma unroll
          for (int i = 0; i < kF8Chunk; ++i) d += wf[r][i] * xf[i];
          acc[r][m] = fmaf(d, bs[r], acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float rs = !block && n0 < n ? __ldg(w.scales + row_of[r]) : 1.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], o);
      acc[r][m] = acc[r][m] * kE4m3Unbias * rs;  // (two products: a large scale times 2^120 could overflow)
    }
  }
  if constexpr (kNorm)
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss[m] += __shfl_xor_sync(0xffffffffu, ss[m], o);
  finish_rows<XT, M, OutT, KS, R>(acc, ss, partial, y, n, k, ldy, accumulate, eps, n0, warp, part, lane);
}

struct Fp8GemvArgs {
  const void* x;
  Fp8Weight w;
  void* y;
  int64_t ldy;
  bool accumulate;
  const float* norm_w;
  float eps;
};

template <typename T, typename OutT, int M, int KS, int R>
void launch_ks(int64_t n, int64_t k, const Fp8GemvArgs& a, cudaStream_t s) {
  const int64_t per_block = (kWarps / KS) * R;
  const unsigned blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  if (a.norm_w != nullptr)
    launch_pdl(gemv_fp8_kernel<T, float, M, OutT, KS, R>, dim3(blocks), dim3(kWarps * 32), s,
               static_cast<const float*>(a.x), a.w, static_cast<OutT*>(a.y), n, k, a.ldy, a.accumulate, a.norm_w,
               a.eps);
  else
    launch_pdl(gemv_fp8_kernel<T, T, M, OutT, KS, R>, dim3(blocks), dim3(kWarps * 32), s, static_cast<const T*>(a.x),
               a.w, static_cast<OutT*>(a.y), n, k, a.ldy, a.accumulate, nullptr, 0.0f);
}

// As kernels-gemv.cu: two warps per row pair once k is long enough that each still streams several loads.
template <typename T, typename OutT, int M>
void launch_m(int64_t n, int64_t k, const Fp8GemvArgs& a, cudaStream_t s) {
  // TRTLLM_FP8_GEMV=<rows per warp><k split>: 42 by default. An e4m3 row is half the bytes of a bf16 one, so with
  // the bf16 GEMV's geometry (22) each warp ended after two loads per row and the step reached 52% of the copy
  // bandwidth; four rows per warp keep twice the bytes in flight (batch-1 8B step on an H100: 22 5.12 ms, 21 4.97,
  // 41 4.20, 42 4.05; bench/RESULTS.md).
  static const int geometry = [] {
    const char* g = std::getenv("TRTLLM_FP8_GEMV");
    return g ? std::atoi(g) : 42;
  }();
  const int rows = geometry / 10, split = k < 2048 ? 1 : geometry % 10;
  if (rows == 4) {
    if (split == 2) launch_ks<T, OutT, M, 2, 4>(n, k, a, s);
    else launch_ks<T, OutT, M, 1, 4>(n, k, a, s);
  } else {
    if (split == 2) launch_ks<T, OutT, M, 2, 2>(n, k, a, s);
    else launch_ks<T, OutT, M, 1, 2>(n, k, a, s);
  }
}

template <typename T, typename OutT>
void launch(int64_t m, int64_t n, int64_t k, const Fp8GemvArgs& a, cudaStream_t s) {
  with_rows(m, [&](auto rows) { launch_m<T, OutT, decltype(rows)::value>(n, k, a, s); });
}

void dispatch(int64_t m, int64_t n, int64_t k, const Fp8GemvArgs& a, DType dt, bool y_is_f32, cudaStream_t s) {
  if (y_is_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, float>(m, n, k, a, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, T>(m, n, k, a, s)));
  }
}

void check_gemv(int64_t m, int64_t k, const Fp8Weight& w, const char* what) {
  if (!gemv_fp8_applicable(m, k, w))
    throw EngineError(ErrorCode::internal, std::string(what) + " called with m " + std::to_string(m) + ", k " +
                                               std::to_string(k) + ", block " + std::to_string(w.block));
}

}  // namespace

void quantize_e4m3(const void* x, DType dt, int64_t rows, int64_t cols, Fp8Quant mode, int32_t group,
                   float fixed_scale, uint8_t* q, float* scales, int64_t scale_ld, cudaStream_t s,
                   bool from_registers) {
  if (rows == 0 || cols == 0) return;
  if (mode == Fp8Quant::group && group <= 0)
    throw EngineError(ErrorCode::internal, "quantize_e4m3: group " + std::to_string(group));
  const int threads = cols <= 4096 ? 128 : 256;
  const int64_t vectors = (cols / 8 + threads - 1) / threads;  // 16-byte vectors a thread
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0;
  if (from_registers && cols % 8 == 0 && vectors <= 8 && aligned && rows <= 2147483647 &&
      quantize_regs_fits(mode, group, 8, threads) && fp8_row_regs()) {
    auto go = [&](auto k_tag) {
      constexpr int K = decltype(k_tag)::value;
      ENGINE_DISPATCH_DTYPE(dt, launch_pdl(quantize_regs_kernel<T, K>, dim3(static_cast<unsigned>(rows)),
                                           dim3(threads), s, static_cast<const T*>(x), cols, mode, group,
                                           fixed_scale, q, scales, scale_ld));
    };
    with_row_vectors(vectors, go);
    check_launch("quantize_e4m3");
    return;
  }
  ENGINE_DISPATCH_DTYPE(dt, (quantize_kernel<T><<<static_cast<unsigned>(rows), 256, 0, s>>>(
                                static_cast<const T*>(x), cols, mode, group, fixed_scale, q, scales, scale_ld)));
  check_launch("quantize_e4m3");
}

void add_to_f32(const void* src, DType dt, int64_t rows, int64_t cols, float* y, int64_t ldy, bool accumulate,
                cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((rows * cols + 255) / 256, 65536));
  ENGINE_DISPATCH_DTYPE(dt, (add_to_f32_kernel<T><<<blocks, 256, 0, s>>>(static_cast<const T*>(src), rows, cols, y,
                                                                          ldy, accumulate)));
  check_launch("add_to_f32");
}

void dequantize_e4m3(const Fp8Weight& w, int64_t n, int64_t k, void* out, DType dt, cudaStream_t s) {
  if (n == 0 || k == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n * k + 255) / 256, 65536));
  ENGINE_DISPATCH_DTYPE(dt, (dequantize_kernel<T><<<blocks, 256, 0, s>>>(w, n, k, static_cast<T*>(out))));
  check_launch("dequantize_e4m3");
}

bool gemv_fp8_applicable(int64_t m, int64_t k, const Fp8Weight& w) {
  return m >= 1 && m <= kGemvMaxRows && k % kF8Chunk == 0 && (w.block == 0 || w.block % kF8Chunk == 0);
}

void gemv_fp8(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_is_f32,
              int64_t ldy, bool accumulate, cudaStream_t s) {
  check_gemv(m, k, w, "gemv_fp8");
  if (n == 0) return;
  if (gemv_fp8_mma_applicable(m, k, w))
    return gemv_fp8_mma(m, n, k, x, nullptr, 0.0f, w, dt, y, y_is_f32, ldy, accumulate, s);  // kernels-fp8-mma.cu
  dispatch(m, n, k, Fp8GemvArgs{x, w, y, ldy, accumulate, nullptr, 0.0f}, dt, y_is_f32, s);
  check_launch("gemv_fp8");
}

void gemv_fp8_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const Fp8Weight& w,
                  DType dt, void* y, bool y_is_f32, int64_t ldy, cudaStream_t s) {
  check_gemv(m, k, w, "gemv_fp8_rms");
  if (norm_w == nullptr) throw EngineError(ErrorCode::internal, "gemv_fp8_rms called without a norm weight");
  if (n == 0) return;
  if (gemv_fp8_mma_applicable(m, k, w)) return gemv_fp8_mma(m, n, k, x, norm_w, eps, w, dt, y, y_is_f32, ldy, false, s);
  dispatch(m, n, k, Fp8GemvArgs{x, w, y, ldy, false, norm_w, eps}, dt, y_is_f32, s);
  check_launch("gemv_fp8_rms");
}

}  // namespace engine::cuda
