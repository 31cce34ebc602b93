// The decode GEMV over e4m3 weights on tensor cores (W8A16: the activations stay 16-bit). The SIMT GEMV of
// kernels-fp8.cu widens every weight to fp32 and multiplies it there: 16 FMAs and ~36 integer operations per 16-byte
// load, for every activation row. Here the widened weights stay 16-bit pairs (5 integer operations per 4 bytes) and
// feed mma.sync m16n8k16 with the activation rows as the B operand, so a batch of up to 8 rows costs about what one
// does: on an H200 (8B shape, --quantization fp8) decode steps of batch 2 / 4 / 8 went 5.23 / 7.02 / 11.79 ms ->
// 3.64 / 3.91 / 4.68, batch 1 stayed at 3.7 ms (both kernels read at ~50% of the copy bandwidth there, so the
// integer work was not what bounds batch 1). Staging the weights through a cp.async ring in shared memory instead
// of registers (more blocks an SM) measured slower: 3.97 ms at batch 1 (bench/RESULTS.md).
//
// A block takes 16 weight rows; its 8 warps split k. A lane of a quad (4 lanes) loads 16 contiguous bytes of rows g
// and g + 8 per 64 columns; since a dot product does not care about the order of k, each MMA's k index maps to
// those bytes (a pair of 16-bit registers holds bytes (0, 2) and (1, 3) of a word, the widening's natural order) and
// the activations are packed in the same order. Exactness: every e4m3 value is a bf16 and an fp16 value. bf16
// pairs come out scaled by 2^-120 (the widening places e4m3's exponent field unchanged), so the activations enter
// scaled by 2^64 (exact: a power of two), keeping the products normal in the fp32 accumulators, and the sums are
// scaled back; fp16 pairs come out scaled by 2^-8.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/fp8-gemv-mma.h"
#include "cuda/gemv-common.cuh"
#include "cuda/mma.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kTileRows = 16;    // weight rows a block takes (the MMA's m)
constexpr int kStepK = 64;       // columns a warp covers per step: four MMAs of k 16
constexpr int kParts = 8;        // warps a block, splitting k
constexpr int kUnrollSteps = 4;  // steps whose weight loads are in flight together

// How e4m3 words widen into the MMA's operand pairs of T (mma.cuh), and the power-of-two scales that keep the
// products exact.
template <typename T>
struct Tc;
template <>
struct Tc<__nv_bfloat16> {
  // Bytes (0, 2) and (1, 3) of w as bf16 pairs worth e4m3 x 2^-120: sign kept, the 7 exponent / mantissa bits moved
  // down by 4 into each half's bits 10..4 (kernels-fp8.cu's unpack_e4m3 stops here before widening to fp32).
  static __device__ __forceinline__ void widen(uint32_t w, uint32_t& even, uint32_t& odd) {
    const uint32_t e = w << 8;
    odd = (w & 0x80008000u) | ((w >> 4) & 0x07f007f0u);
    even = (e & 0x80008000u) | ((e >> 4) & 0x07f007f0u);
  }
  static constexpr float kXScale = 0x1p64f;  // products of x 2^64 and w x 2^-120 stay normal in fp32
  static constexpr float kUnbias = 0x1p56f;  // 2^120 / 2^64
};
template <>
struct Tc<__half> {
  // fp16 pairs worth e4m3 x 2^-8: the 7 bits moved down by 1 into bits 13..7 (exponent bias 15 against 7).
  static __device__ __forceinline__ void widen(uint32_t w, uint32_t& even, uint32_t& odd) {
    const uint32_t e = w << 8;
    odd = (w & 0x80008000u) | ((w >> 1) & 0x3f803f80u);
    even = (e & 0x80008000u) | ((e >> 1) & 0x3f803f80u);
  }
  static constexpr float kXScale = 1.0f;
  static constexpr float kUnbias = 0x1p8f;
};

// 16 activations of row g at p (T, or with kNorm the fp32 residual stream times the norm weights gw, adding their
// squares to ss) as the B operand's 8 registers in the weights' k order.
template <typename T, bool kNorm>
__device__ __forceinline__ void load_b(const void* p, const float* gw, float& ss, uint32_t (&b)[8]) {
  float xf[16];
  if constexpr (kNorm) {
    const float4* xp = static_cast<const float4*>(p);
    const float4* gp = reinterpret_cast<const float4*>(gw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 v = __ldg(xp + i), g = __ldg(gp + i);
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      xf[4 * i] = v.x * g.x, xf[4 * i + 1] = v.y * g.y, xf[4 * i + 2] = v.z * g.z, xf[4 * i + 3] = v.w * g.w;
    }
  } else {
    float lo[gemv_common::kChunk], hi[gemv_common::kChunk];
    gemv_common::load_chunk(static_cast<const T*>(p), lo);
    gemv_common::load_chunk(static_cast<const T*>(p) + 8, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) xf[i] = lo[i], xf[8 + i] = hi[i];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    b[2 * j] = Mma<T>::pack(xf[4 * j] * Tc<T>::kXScale, xf[4 * j + 2] * Tc<T>::kXScale);
    b[2 * j + 1] = Mma<T>::pack(xf[4 * j + 1] * Tc<T>::kXScale, xf[4 * j + 3] * Tc<T>::kXScale);
  }
}

// grid: ceil(n / 16) blocks of kParts warps. x: [M, k] (T, or fp32 with kNorm); y[m * ldy + row] (+)= the product.
template <typename T, bool kNorm, int M, typename OutT, bool kBlock>
__global__ void __launch_bounds__(32 * kParts)
    gemv_fp8_mma_kernel(const void* __restrict__ x, Fp8Weight w, OutT* y, int64_t n, int64_t k, int64_t ldy,
                        bool accumulate, const float* __restrict__ norm_w, float eps) {
  __shared__ float part[kParts][kTileRows][8];
  __shared__ float part_ss[kParts][8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int64_t row_a = min(n0 + g, n - 1), row_b = min(n0 + g + 8, n - 1);  // (rows past n: loaded, never stored)
  const uint8_t* wa = w.data + row_a * k + 16 * tig;
  const uint8_t* wb = w.data + row_b * k + 16 * tig;
  const int64_t steps = k / kStepK, per = (steps + kParts - 1) / kParts;
  const int64_t s_begin = warp * per, s_end = min(steps, s_begin + per);
  // The first weights are no kernel's output: on their way to L2 before the programmatic-launch wait (pdl.cuh).
#pragma unroll
  for (int u = 0; u < kUnrollSteps; ++u) {
    if (s_begin + u < s_end) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(wa + (s_begin + u) * kStepK));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(wb + (s_begin + u) * kStepK));
    }
  }
  pdl_wait();
  pdl_trigger();

  const bool has_x = g < M;  // lanes whose B column is an activation row (the others feed zeros)
  using XT = std::conditional_t<kNorm, float, T>;
  const XT* xr = static_cast<const XT*>(x) + static_cast<int64_t>(has_x ? g : 0) * k + 16 * tig;
  const float* gw = kNorm ? norm_w + 16 * tig : nullptr;
  const float* block_scales = kBlock ? w.scales + (n0 / w.block) * w.scale_ld : nullptr;  // (16 divides block)
  float acc[4] = {0, 0, 0, 0}, ss = 0;
  for (int64_t s0 = s_begin; s0 < s_end; s0 += kUnrollSteps) {
    uint4 va[kUnrollSteps], vb[kUnrollSteps];
#pragma unroll
    for (int u = 0; u < kUnrollSteps; ++u) {
      const bool ok = s0 + u < s_end;
      va[u] = ok ? __ldcs(reinterpret_cast<const uint4*>(wa + (s0 + u) * kStepK)) : make_uint4(0, 0, 0, 0);
      vb[u] = ok ? __ldcs(reinterpret_cast<const uint4*>(wb + (s0 + u) * kStepK)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnrollSteps; ++u) {
      const int64_t s = s0 + u;
      if (s >= s_end) break;
      uint32_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (has_x) load_b<T, kNorm>(xr + s * kStepK, kNorm ? gw + s * kStepK : nullptr, ss, b);
      const uint32_t ra[4] = {va[u].x, va[u].y, va[u].z, va[u].w}, rb[4] = {vb[u].x, vb[u].y, vb[u].z, vb[u].w};
      float c[4] = {0, 0, 0, 0};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a[4];
        Tc<T>::widen(ra[j], a[0], a[2]);  // row g: k pairs (2 tig, +1) and (2 tig + 8, +9) of MMA j
        Tc<T>::widen(rb[j], a[1], a[3]);  // row g + 8
        if constexpr (kBlock) {
          Mma<T>::run(c, a, b[2 * j], b[2 * j + 1]);
        } else {
          Mma<T>::run(acc, a, b[2 * j], b[2 * j + 1]);
        }
      }
      if constexpr (kBlock) {
        const float bs = __ldg(block_scales + (s * kStepK) / w.block);  // (64 divides block: one block a step)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = fmaf(c[e], bs, acc[e]);
      }
    }
  }
  // acc: rows g (acc 0, 1) and g + 8 (acc 2, 3), activation rows 2 tig and 2 tig + 1.
  part[warp][g][2 * tig] = acc[0];
  part[warp][g][2 * tig + 1] = acc[1];
  part[warp][g + 8][2 * tig] = acc[2];
  part[warp][g + 8][2 * tig + 1] = acc[3];
  if constexpr (kNorm) {
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    if (tig == 0) part_ss[warp][g] = ss;  // (zero for g >= M)
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t >= kTileRows * M) return;
  const int r = t / M, m = t % M;
  const int64_t row = n0 + r;
  if (row >= n) return;
  float sum = 0;
#pragma unroll
  for (int p = 0; p < kParts; ++p) sum += part[p][r][m];
  sum *= Tc<T>::kUnbias;  // (before the scale: a large scale times the unbias could overflow)
  if constexpr (!kBlock) sum *= __ldg(w.scales + row);
  if constexpr (kNorm) {
    float total = 0;
#pragma unroll
    for (int p = 0; p < kParts; ++p) total += part_ss[p][m];
    sum *= 1.0f / sqrtf(total / static_cast<float>(k) + eps);  // the norm kernel's 1 / rms
  }
  OutT* dst = y + m * ldy + row;
  const float prev = accumulate ? to_float(*dst) : 0.0f;
  *dst = from_float<OutT>(prev + sum);
}

template <typename T, bool kNorm, typename OutT, int M>
void launch_m(int64_t n, int64_t k, const void* x, const Fp8Weight& w, void* y, int64_t ldy, bool accumulate,
              const float* norm_w, float eps, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((n + kTileRows - 1) / kTileRows));
  if (w.block != 0)
    launch_pdl(gemv_fp8_mma_kernel<T, kNorm, M, OutT, true>, grid, dim3(32 * kParts), s, x, w, static_cast<OutT*>(y),
               n, k, ldy, accumulate, norm_w, eps);
  else
    launch_pdl(gemv_fp8_mma_kernel<T, kNorm, M, OutT, false>, grid, dim3(32 * kParts), s, x, w, static_cast<OutT*>(y),
               n, k, ldy, accumulate, norm_w, eps);
}

template <typename T, bool kNorm>
void launch(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, void* y, bool y_is_f32, int64_t ldy,
            bool accumulate, const float* norm_w, float eps, cudaStream_t s) {
  gemv_common::with_rows(m, [&](auto rows) {
    constexpr int M = decltype(rows)::value;
    if (y_is_f32)
      launch_m<T, kNorm, float, M>(n, k, x, w, y, ldy, accumulate, norm_w, eps, s);
    else
      launch_m<T, kNorm, T, M>(n, k, x, w, y, ldy, accumulate, norm_w, eps, s);
  });
}

}  // namespace

bool gemv_fp8_mma_on() {
  // TRTLLM_FP8_GEMV_MMA=0: the SIMT kernel for every shape (comparison runs).
  static const bool on = [] {
    const char* v = std::getenv("TRTLLM_FP8_GEMV_MMA");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool gemv_fp8_mma_applicable(int64_t m, int64_t k, const Fp8Weight& w) {
  return gemv_fp8_mma_on() && m >= 1 && m <= 8 && k >= kStepK && k % kStepK == 0 &&
         (w.block == 0 || w.block % kStepK == 0);
}

void gemv_fp8_mma(int64_t m, int64_t n, int64_t k, const void* x, const float* norm_w, float eps, const Fp8Weight& w,
                  DType dt, void* y, bool y_is_f32, int64_t ldy, bool accumulate, cudaStream_t s) {
  if (n == 0) return;
  if (norm_w != nullptr) {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, true>(m, n, k, x, w, y, y_is_f32, ldy, accumulate, norm_w, eps, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch<T, false>(m, n, k, x, w, y, y_is_f32, ldy, accumulate, nullptr, 0.0f, s)));
  }
  check_launch("gemv_fp8 (tensor cores)");
}

}  // namespace engine::cuda
