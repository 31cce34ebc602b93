// Elementwise and per-row kernels of the decoder: embedding, norms, rotary embedding + paged KV write,
// activations, bias, and the small reshuffles around the LM head. Math in fp32, as the CPU backend does.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/activation.cuh"
#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/fp8-quant-row.cuh"
#include "cuda/kernels.h"
#include "cuda/kv-element.cuh"
#include "cuda/pdl.cuh"
#include "cuda/rope.cuh"
#include "model/dummy-value.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops: one launch covers any size with a bounded grid.
__device__ __forceinline__ int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ float block_sum(float v, float* scratch /* [32] */) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(t);
}

template <typename T>
__global__ void embed_kernel(const int32_t* tokens, int64_t rows, const T* table, int64_t v0, int64_t nv, int64_t hidden,
                             float scale, float* x) {
  pdl_enter();  // pdl.cuh
  const int64_t r = blockIdx.x;
  const int64_t local = static_cast<int64_t>(tokens[r]) - v0;
  float* xr = x + r * hidden;
  const bool here = local >= 0 && local < nv;
  const T* er = table + (here ? local : 0) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) xr[i] = here ? to_float(er[i]) * scale : 0.0f;
}

template <typename T>
__global__ void add_pos_kernel(float* x, const int32_t* positions, const T* pos, int64_t hidden) {
  const int64_t r = blockIdx.x;
  const T* pr = pos + static_cast<int64_t>(positions[r]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) x[r * hidden + i] += to_float(pr[i]);
}

// One block's row of `dim` values normed (RMSNorm without b, LayerNorm with it) in two passes over the row, each
// result handed to emit(i, value): norm_kernel stores it, add_norm_kernel adds it to the residual.
template <typename Emit>
__device__ __forceinline__ void norm_row(const float* __restrict__ xr, int64_t dim, const float* __restrict__ w,
                                         const float* __restrict__ b, float eps, float* scratch, Emit emit) {
  if (b == nullptr) {
    float ss = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) emit(i, w[i] * (xr[i] * inv));
    return;
  }
  float sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
  const float mean = block_sum(sum, scratch) / static_cast<float>(dim);
  float var = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) var += (xr[i] - mean) * (xr[i] - mean);
  var = block_sum(var, scratch);
  const float inv = 1.0f / sqrtf(var / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) emit(i, (xr[i] - mean) * inv * w[i] + b[i]);
}

// One block per row. RMSNorm keeps the row in registers between the two passes when it fits (dim <= 4 * 4 *
// blockDim, every realistic hidden size), so x is read from memory once.
constexpr int kNormCached = 4;  // float4s per thread kept in registers
__host__ __device__ inline bool rms_fits_registers(int64_t dim, int64_t threads) {
  return dim % 4 == 0 && dim <= static_cast<int64_t>(kNormCached) * 4 * threads;
}

// The block's row xr RMS-normed with the row in registers (rms_fits_registers): emit(c, i, e) gets the 4 outputs
// of columns [i, i + 4) as rounded to T, the thread's c-th float4.
template <typename T, typename Emit>
__device__ __forceinline__ void rms_row_cached(const float* __restrict__ xr, int64_t dim, const float* __restrict__ w,
                                               float eps, float* scratch, Emit emit) {
  float4 v[kNormCached];
  float ss = 0;
#pragma unroll
  for (int c = 0; c < kNormCached; ++c) {
    const int64_t i = (static_cast<int64_t>(c) * blockDim.x + threadIdx.x) * 4;
    v[c] = i < dim ? *reinterpret_cast<const float4*>(xr + i) : make_float4(0, 0, 0, 0);
    ss += v[c].x * v[c].x + v[c].y * v[c].y + v[c].z * v[c].z + v[c].w * v[c].w;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll
  for (int c = 0; c < kNormCached; ++c) {
    const int64_t i = (static_cast<int64_t>(c) * blockDim.x + threadIdx.x) * 4;
    if (i >= dim) break;
    const float4 wv = *reinterpret_cast<const float4*>(w + i);
    const T e[4] = {from_float<T>(wv.x * (v[c].x * inv)), from_float<T>(wv.y * (v[c].y * inv)),
                    from_float<T>(wv.z * (v[c].z * inv)), from_float<T>(wv.w * (v[c].w * inv))};
    emit(c, i, e);
  }
}
template <typename T>
__device__ __forceinline__ void norm_block_row(const float* __restrict__ x, T* __restrict__ out, int64_t dim,
                                               const float* __restrict__ w, const float* __restrict__ b, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  T* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  if (b == nullptr && rms_fits_registers(dim, blockDim.x)) {
    rms_row_cached<T>(xr, dim, w, eps, scratch, [&](int, int64_t i, const T (&e)[4]) {
      o[i] = e[0];
      o[i + 1] = e[1];
      o[i + 2] = e[2];
      o[i + 3] = e[3];
    });
    return;
  }
  // RMSNorm of a row too wide for the registers, or LayerNorm.
  norm_row(xr, dim, w, b, eps, scratch, [&](int64_t i, float v) { o[i] = from_float<T>(v); });
}

template <typename T>
__global__ void norm_kernel(const float* __restrict__ x, T* __restrict__ out, int64_t dim, const float* __restrict__ w,
                            const float* __restrict__ b, float eps) {
  pdl_enter();  // pdl.cuh
  norm_block_row(x, out, dim, w, b, eps);
}

// norm_kernel, then the block quantizes the row it just wrote (fp8-quant-row.cuh; the barrier makes the row's
// writes visible to every thread of the block).
template <typename T>
__global__ void norm_e4m3_kernel(const float* __restrict__ x, T* __restrict__ out, int64_t dim,
                                 const float* __restrict__ w, const float* __restrict__ b, float eps, Fp8ActOut qa) {
  pdl_enter();  // pdl.cuh
  norm_block_row(x, out, dim, w, b, eps);
  const int64_t r = blockIdx.x;
  if (r >= qa.rows) return;
  __syncthreads();
  quantize_row(out + r * dim, dim, qa.mode, qa.group, qa.fixed, qa.q + r * dim, qa.scales, qa.scale_ld, r);
}

// norm_e4m3_kernel for an RMSNorm row that fits the registers (rms_fits_registers): the normed row is stored with
// one 8-byte store a float4 and quantized from the registers (quantize_regs), not read back twice.
template <typename T>
__global__ void norm_e4m3_regs_kernel(const float* __restrict__ x, T* __restrict__ out, int64_t dim,
                                      const float* __restrict__ w, float eps, Fp8ActOut qa) {
  pdl_enter();  // pdl.cuh
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  T* o = out + r * dim;
  float v[kNormCached][4];
  rms_row_cached<T>(x + r * dim, dim, w, eps, scratch, [&](int c, int64_t i, const T (&e)[4]) {
    uint2 raw;
    T* re = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      re[j] = e[j];
      v[c][j] = to_float(e[j]);  // the value as stored: what the separate quantize pass would read
    }
    *reinterpret_cast<uint2*>(o + i) = raw;
  });
  if (r >= qa.rows) return;
  quantize_regs<kNormCached, 4>(v, dim, qa.mode, qa.group, qa.fixed, qa.q + r * dim, qa.scales, qa.scale_ld, r);
}

// One thread per job of a row, a row's jobs spread over several blocks (grid: (job blocks, rows)): a job is one
// pair (i, i + half) of up to kRopeHeads heads of q and k, rotated by one (cos, sin) (with the bias), or one q / k
// element when nothing rotates, or one v element. A decode step has a single row, so the jobs must run side by side,
// not in a loop of one block: each read of the row would wait for the previous iteration's writes (the compiler
// cannot tell they do not alias) — a job's heads are all loaded before any is written. The (cos, sin) in double is
// what costs (a prompt chunk of the 8B shape: 40 heads x 64 pairs of every token): one per kRopeHeads heads.
constexpr int kRopeThreads = 256;
constexpr int kRopeHeads = 8;
// S: the pool's element (kv-element.cuh); k_inv / v_inv: 1 / the layer's scales (fp8).
template <typename T, bool F8, typename S = KvStore<T, F8>>
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_kernel(float* __restrict__ qkv, int64_t stride, const float* __restrict__ bias, int32_t n_heads,
                   int32_t n_kv, int32_t hd, const int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                   const uint8_t* __restrict__ use_long, S* __restrict__ k_pool, S* __restrict__ v_pool, float k_inv,
                   float v_inv, const int64_t* __restrict__ kv_dst, int32_t tpb, RowDelta d) {
  pdl_enter();  // pdl.cuh
  const int64_t t = blockIdx.y;
  float* row = qkv + t * stride;
  const int32_t g = d.delta != nullptr ? d.at[t] : -1;
  const float* drow = g >= 0 ? d.delta + static_cast<int64_t>(g) * d.ld : nullptr;  // the row's LoRA deltas
  const int32_t q_dim = n_heads * hd, kv_dim = n_kv * hd, half = hd / 2, heads = n_heads + n_kv;
  // Rotation jobs: (group of kRopeHeads heads, pair) — q heads, then the k heads.
  const int32_t rotations = inv_freq != nullptr ? (heads + kRopeHeads - 1) / kRopeHeads * half : 0;
  const int32_t plain = inv_freq != nullptr ? 0 : q_dim + kv_dim;
  const int32_t j = static_cast<int32_t>(blockIdx.x) * kRopeThreads + static_cast<int32_t>(threadIdx.x);
  const int64_t base = kv_dst[t];
  auto pool_at = [&](int32_t i) {  // element i of the row's k (or v) part -> its place in the pool
    return base + static_cast<int64_t>(i / hd) * tpb * hd + i % hd;
  };
  if (j < rotations) {
    const int32_t h0 = j / half * kRopeHeads, i = j % half;
    float a[kRopeHeads], b[kRopeHeads];
#pragma unroll
    for (int k = 0; k < kRopeHeads; ++k) {
      const int32_t at = (h0 + k) * hd + i;
      a[k] = b[k] = 0;
      if (h0 + k < heads) {
        a[k] = row[at];
        b[k] = row[at + half];
        if (bias != nullptr) {
          a[k] += bias[at];
          b[k] += bias[at + half];
        }
        if (drow != nullptr) {
          a[k] += drow[at];
          b[k] += drow[at + half];
        }
      }
    }
    const float* inv = use_long != nullptr && use_long[t] ? inv_freq + half : inv_freq;  // longrope's long table
    const float2 cs = rope_cos_sin(positions[t], inv[i]);  // rope.cuh
#pragma unroll
    for (int k = 0; k < kRopeHeads; ++k) {
      const int32_t h = h0 + k, at = h * hd + i;
      if (h >= heads) break;
      const float ra = rope_pair(a[k], b[k], cs, true), rb = rope_pair(b[k], a[k], cs, false);
      if (h < n_heads) {
        row[at] = ra;
        row[at + half] = rb;
      } else {
        k_pool[pool_at(at - q_dim)] = kv_encode<T, F8>(ra, k_inv);
        k_pool[pool_at(at - q_dim + half)] = kv_encode<T, F8>(rb, k_inv);
      }
    }
  } else if (j < rotations + plain) {
    float v = row[j - rotations];
    const int32_t i = j - rotations;
    if (bias != nullptr) v += bias[i];
    if (drow != nullptr) v += drow[i];
    if (i >= q_dim) k_pool[pool_at(i - q_dim)] = kv_encode<T, F8>(v, k_inv);
    if (bias != nullptr || drow != nullptr) row[i] = v;
  } else if (j < rotations + plain + kv_dim) {
    const int32_t i = j - rotations - plain;
    float v = row[q_dim + kv_dim + i];
    if (bias != nullptr) v += bias[q_dim + kv_dim + i];
    if (drow != nullptr) v += drow[q_dim + kv_dim + i];
    v_pool[pool_at(i)] = kv_encode<T, F8>(v, v_inv);
  }
}

// Columns [i, i + 8) of a gated row from their gate and up values (16 bytes each): act(gate + b) * (up + b);
// dg (nullable): the row's deltas at column i (16-byte aligned), its up half inter further.
template <typename T>
__device__ __forceinline__ uint4 gated8(const uint4& graw, const uint4& uraw, const float* __restrict__ b, int64_t i,
                                        int64_t inter, Act act, const float* __restrict__ dg = nullptr) {
  const T* gv = reinterpret_cast<const T*>(&graw);
  const T* uv = reinterpret_cast<const T*>(&uraw);
  float dgv[8], duv[8];
  if (dg != nullptr) {
    const float* du = dg + inter;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 a = *reinterpret_cast<const float4*>(dg + 4 * h), c = *reinterpret_cast<const float4*>(du + 4 * h);
      dgv[4 * h] = a.x, dgv[4 * h + 1] = a.y, dgv[4 * h + 2] = a.z, dgv[4 * h + 3] = a.w;
      duv[4 * h] = c.x, duv[4 * h + 1] = c.y, duv[4 * h + 2] = c.z, duv[4 * h + 3] = c.w;
    }
  }
  uint4 oraw;
  T* ov = reinterpret_cast<T*>(&oraw);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    float gf = to_float(gv[k]), uf = to_float(uv[k]);
    if (dg != nullptr) {
      gf += dgv[k];
      uf += duv[k];
    }
    if (b != nullptr) {
      gf += b[i + k];
      uf += b[inter + i + k];
    }
    ov[k] = from_float<T>(apply_act(gf, act) * uf);
  }
  return oraw;
}

// grid: (column blocks, rows); 8 columns per thread with 16-byte loads when inter % 8 == 0, else one.
template <typename T, int V>
__global__ void gated_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t inter, Act act,
                             const float* __restrict__ b, RowDelta d) {
  const int64_t r = blockIdx.y;
  // (The deltas' row map is host-written: read before the wait; the deltas themselves after it.)
  const int32_t at = d.delta != nullptr ? d.at[r] : -1;
  pdl_enter();  // pdl.cuh
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= inter) return;
  const T* g = gu + r * 2 * inter + i;
  const T* u = g + inter;
  T* o = out + r * inter + i;
  const float* dg = at >= 0 ? d.delta + static_cast<int64_t>(at) * d.ld + i : nullptr;
  if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(o) = gated8<T>(*reinterpret_cast<const uint4*>(g), *reinterpret_cast<const uint4*>(u),
                                             b, i, inter, act, dg);
  } else {
    float gf = to_float(g[0]), uf = to_float(u[0]);
    if (dg != nullptr) {
      gf += dg[0];
      uf += dg[inter];
    }
    if (b != nullptr) {
      gf += b[i];
      uf += b[inter + i];
    }
    o[0] = from_float<T>(apply_act(gf, act) * uf);
  }
}

// One block per row: gated_kernel's values for the whole row, then the row quantized (as norm_e4m3_kernel).
template <typename T>
__global__ void gated_e4m3_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t inter, Act act,
                                  const float* __restrict__ b, Fp8ActOut qa) {
  pdl_enter();  // pdl.cuh
  const int64_t r = blockIdx.x;
  const T* g = gu + r * 2 * inter;
  const T* u = g + inter;
  T* o = out + r * inter;
  for (int64_t i = threadIdx.x; i < inter; i += blockDim.x) {
    float gf = to_float(g[i]), uf = to_float(u[i]);
    if (b != nullptr) {
      gf += b[i];
      uf += b[inter + i];
    }
    o[i] = from_float<T>(apply_act(gf, act) * uf);
  }
  if (r >= qa.rows) return;
  __syncthreads();
  quantize_row(o, inter, qa.mode, qa.group, qa.fixed, qa.q + r * inter, qa.scales, qa.scale_ld, r);
}

// gated_e4m3_kernel for rows of inter % 8 == 0 up to K * 8 * blockDim.x values: every thread loads its K vectors
// of gate and up at once (16-byte loads, all in flight before any arithmetic), keeps the activations in registers
// and quantizes them from there (quantize_regs): one read of gu, one write of out and of the bytes. The loop of
// the kernel above waits for each element's loads in turn and reads the row back twice (a 14,336-wide row of a
// batch of 512 took ~48 µs, bench/RESULTS.md).
constexpr int kGatedThreads = 512;
// Two blocks an SM where the row's registers allow it (K <= 4: 64 registers, no spills; the 8B shape's 14,336-wide
// rows are K = 4): with one, a batch of 512 rows went through the SMs in four waves of latency-bound blocks
// (82 registers, 1.12 ms a batch-512 decode step on an H200, ~1 TB/s). K = 8 spills at 64, so stays at one.
template <typename T, int K>
__global__ void __launch_bounds__(kGatedThreads, K <= 4 ? 2 : 1)
    gated_e4m3_vec_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t inter, Act act,
                          const float* __restrict__ b, Fp8ActOut qa) {
  pdl_enter();  // pdl.cuh
  const int64_t r = blockIdx.x;
  const T* g = gu + r * 2 * inter;
  const T* u = g + inter;
  T* o = out + r * inter;
  uint4 graw[K], uraw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * 8;
    if (i < inter) {
      graw[k] = *reinterpret_cast<const uint4*>(g + i);
      uraw[k] = *reinterpret_cast<const uint4*>(u + i);
    }
  }
  float v[K][8];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = (static_cast<int64_t>(k) * blockDim.x + threadIdx.x) * 8;
    if (i >= inter) continue;
    const uint4 oraw = gated8<T>(graw[k], uraw[k], b, i, inter, act);
    const T* ov = reinterpret_cast<const T*>(&oraw);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[k][e] = to_float(ov[e]);  // as stored: what the separate quantize pass would read
    *reinterpret_cast<uint4*>(o + i) = oraw;
  }
  if (r >= qa.rows) return;
  quantize_regs<K, 8>(v, inter, qa.mode, qa.group, qa.fixed, qa.q + r * inter, qa.scales, qa.scale_ld, r);
}

template <typename T>
__global__ void act_kernel(T* x, int64_t rows, int64_t n, Act act, const float* b) {
  const int64_t total = rows * n;
  for (int64_t idx = global_thread(); idx < total; idx += grid_threads()) {
    float v = to_float(x[idx]);
    if (b != nullptr) v += b[idx % n];
    x[idx] = from_float<T>(apply_act(v, act));
  }
}

__global__ void add_bias_kernel(float* y, const float* b, int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t idx = global_thread(); idx < total; idx += grid_threads()) y[idx] += b[idx % n];
}

// One block per row: x[r] += norm(y[r]), norm_row's two passes over y (just written, so it comes from L2).
__global__ void add_norm_kernel(const float* __restrict__ y, float* __restrict__ x, int64_t dim,
                                const float* __restrict__ w, const float* __restrict__ b, float eps) {
  pdl_enter();  // pdl.cuh
  __shared__ float scratch[32];
  const float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  norm_row(yr, dim, w, b, eps, scratch, [&](int64_t i, float v) { xr[i] += v; });
}

__global__ void soft_cap_kernel(float* x, int64_t n, float cap) {
  pdl_enter();  // pdl.cuh
  for (int64_t i = global_thread(); i < n; i += grid_threads()) x[i] = cap * tanhf(x[i] / cap);
}

__global__ void gather_rows_kernel(const float* src, const int32_t* idx, float* dst, int64_t n) {
  pdl_enter();  // pdl.cuh
  const float* s = src + static_cast<int64_t>(idx[blockIdx.x]) * n;
  float* d = dst + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}

template <typename T>
__global__ void convert_kernel(const float* src, T* dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = from_float<T>(src[i]);
}

__global__ void mask_kernel(float* x, int64_t rows, int64_t cols, int64_t real) {
  const int64_t pad = cols - real, total = rows * pad;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) x[(i / pad) * cols + real + i % pad] = -INFINITY;
}

__global__ void assemble_kernel(const float* all, int32_t tp, int64_t rows, int64_t vl, int64_t vocab, float* out) {
  const int64_t total = rows * vocab;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t r = i / vocab, c = i % vocab;
    const int64_t t = c / vl, j = c % vl;
    out[i] = all[(t * rows + r) * vl + j];
  }
}

template <typename T>
__global__ void fill_dummy_kernel(T* dst, int64_t rows, int64_t cols, int64_t ld, uint64_t seed, uint32_t tensor,
                                  int64_t row0, int64_t col0, int64_t gcols, float scale) {
  const int64_t total = rows * cols;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t r = i / cols, c = i % cols;
    const uint64_t index = static_cast<uint64_t>((row0 + r) * gcols + col0 + c);
    dst[r * ld + c] = from_float<T>(dummy_value(seed, tensor, index, scale));
  }
}

__global__ void fill_constant_kernel(float* dst, int64_t n, float v) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = v;
}


}  // namespace

void embed(const int32_t* tokens, int64_t rows, const void* table, DType dt, int64_t v0, int64_t nv, int64_t hidden,
           float scale, float* x, cudaStream_t s) {
  if (rows == 0) return;
  ENGINE_DISPATCH_DTYPE(dt, launch_pdl(embed_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(256), s,
                                tokens, rows, static_cast<const T*>(table), v0, nv, hidden, scale, x));
  check_launch("embed");
}

void add_position_embedding(float* x, const int32_t* positions, int64_t rows, const void* pos_table, DType dt,
                            int64_t hidden, cudaStream_t s) {
  if (rows == 0) return;
  ENGINE_DISPATCH_DTYPE(dt, add_pos_kernel<T><<<static_cast<unsigned>(rows), 256, 0, s>>>(
                                x, positions, static_cast<const T*>(pos_table), hidden));
  check_launch("add_position_embedding");
}

void norm(const float* x, void* out, DType dt, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
          cudaStream_t s) {
  if (rows == 0) return;
  // 256 threads hold a row of 4096 in registers; wider rows take more threads (up to 1024, 16384 cached).
  const int threads = dim <= 4096 ? 256 : dim <= 8192 ? 512 : 1024;
  ENGINE_DISPATCH_DTYPE(dt, launch_pdl(norm_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads), s,
                                x, static_cast<T*>(out), dim, w, b, eps));
  check_launch("norm");
}

namespace {

// grid: (rows, n_heads + n_kv + 1); one warp per block: the y-th head of the row (the last y: v's bias only).
__global__ void qk_norm_kernel(float* qkv, int64_t stride, const float* bias, int32_t n_heads, int32_t n_kv,
                               int32_t head_dim, const float* q_w, const float* k_w, float eps) {
  pdl_enter();  // pdl.cuh
  float* row = qkv + static_cast<int64_t>(blockIdx.x) * stride;
  const int h = blockIdx.y, lane = threadIdx.x;
  if (h == n_heads + n_kv) {  // the v heads: bias only
    if (bias == nullptr) return;
    const int64_t v0 = static_cast<int64_t>(n_heads + n_kv) * head_dim;
    for (int64_t i = lane; i < static_cast<int64_t>(n_kv) * head_dim; i += 32) row[v0 + i] += bias[v0 + i];
    return;
  }
  float* x = row + static_cast<int64_t>(h) * head_dim;
  const float* b = bias ? bias + static_cast<int64_t>(h) * head_dim : nullptr;
  const float* w = h < n_heads ? q_w : k_w;
  float ss = 0;
  for (int d = lane; d < head_dim; d += 32) {
    const float v = x[d] + (b ? b[d] : 0.0f);
    x[d] = v;
    ss += v * v;
  }
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(head_dim) + eps);
  for (int d = lane; d < head_dim; d += 32) x[d] = w[d] * (x[d] * inv);
}

}  // namespace

void qk_norm(float* qkv, int64_t rows, int64_t stride, const float* bias, int32_t n_heads, int32_t n_kv,
             int32_t head_dim, const float* q_w, const float* k_w, float eps, cudaStream_t s) {
  if (rows == 0) return;
  if (rows > 2147483647) throw EngineError(ErrorCode::internal, "qk_norm over too many rows");
  launch_pdl(qk_norm_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(n_heads + n_kv + 1)), dim3(32), s,
             qkv, stride, bias, n_heads, n_kv, head_dim, q_w, k_w, eps);
  check_launch("qk_norm");
}

void rope_and_write_kv(float* qkv, int64_t rows, int64_t stride, const float* bias, int32_t n_heads, int32_t n_kv,
                       int32_t head_dim, const int32_t* positions, const float* inv_freq, const uint8_t* use_long,
                       void* k_pool, void* v_pool, DType dt, const KvFormat& kv, const int64_t* kv_dst,
                       int32_t tokens_per_block, cudaStream_t s, const RowDelta& d) {
  if (rows == 0) return;
  if (rows > 65535) throw EngineError(ErrorCode::internal, "rope_and_write_kv over more than 65535 rows");
  const int64_t q_dim = static_cast<int64_t>(n_heads) * head_dim, kv_dim = static_cast<int64_t>(n_kv) * head_dim;
  const int64_t rotation_jobs = (n_heads + n_kv + kRopeHeads - 1) / kRopeHeads * (head_dim / 2);
  const int64_t jobs = (inv_freq != nullptr ? rotation_jobs : q_dim + kv_dim) + kv_dim;
  const dim3 grid(static_cast<unsigned>((jobs + kRopeThreads - 1) / kRopeThreads), static_cast<unsigned>(rows));
  if (kv.fp8) {
    ENGINE_DISPATCH_DTYPE(dt, launch_pdl(rope_kv_kernel<T, true>, grid, dim3(kRopeThreads), s, qkv, stride, bias,
                                         n_heads, n_kv, head_dim, positions, inv_freq, use_long,
                                         static_cast<uint8_t*>(k_pool), static_cast<uint8_t*>(v_pool),
                                         1.0f / kv.k_scale, 1.0f / kv.v_scale, kv_dst, tokens_per_block, d));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, launch_pdl(rope_kv_kernel<T, false>, grid, dim3(kRopeThreads), s, qkv, stride, bias,
                                         n_heads, n_kv, head_dim, positions, inv_freq, use_long,
                                         static_cast<T*>(k_pool), static_cast<T*>(v_pool), 1.0f, 1.0f, kv_dst,
                                         tokens_per_block, d));
  }
  check_launch("rope_and_write_kv");
}

void norm_e4m3(const float* x, void* out, DType dt, int64_t rows, int64_t dim, const float* w, const float* b,
               float eps, const Fp8ActOut& qa, cudaStream_t s) {
  if (rows == 0) return;
  if (rows > 2147483647) throw EngineError(ErrorCode::internal, "norm_e4m3 over too many rows");
  const int threads = dim <= 4096 ? 256 : dim <= 8192 ? 512 : 1024;  // (norm()'s choice)
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(qa.q) % 4 == 0;
  if (b == nullptr && rms_fits_registers(dim, threads) && aligned &&
      quantize_regs_fits(qa.mode, qa.group, 4, threads) && fp8_row_regs()) {
    ENGINE_DISPATCH_DTYPE(dt, launch_pdl(norm_e4m3_regs_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads),
                                         s, x, static_cast<T*>(out), dim, w, eps, qa));
    check_launch("norm_e4m3");
    return;
  }
  ENGINE_DISPATCH_DTYPE(dt, launch_pdl(norm_e4m3_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads), s, x,
                                       static_cast<T*>(out), dim, w, b, eps, qa));
  check_launch("norm_e4m3");
}

void gated_activation_e4m3(const void* gu, void* out, DType dt, int64_t rows, int64_t inter, Act act, const float* b,
                           const Fp8ActOut& qa, cudaStream_t s) {
  if (rows == 0) return;
  if (rows > 2147483647) throw EngineError(ErrorCode::internal, "gated_activation_e4m3 over too many rows");
  const int64_t vectors = (inter + 8 * kGatedThreads - 1) / (8 * kGatedThreads);  // a thread's 8-value vectors
  const bool aligned = reinterpret_cast<uintptr_t>(gu) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(qa.q) % 8 == 0;
  if (inter % 8 == 0 && vectors <= 8 && aligned && quantize_regs_fits(qa.mode, qa.group, 8, kGatedThreads) &&
      fp8_row_regs()) {
    const dim3 grid(static_cast<unsigned>(rows)), block(kGatedThreads);
    auto go = [&](auto k_tag) {
      constexpr int K = decltype(k_tag)::value;
      ENGINE_DISPATCH_DTYPE(dt, launch_pdl(gated_e4m3_vec_kernel<T, K>, grid, block, s, static_cast<const T*>(gu),
                                           static_cast<T*>(out), inter, act, b, qa));
    };
    with_row_vectors(vectors, go);
    check_launch("gated_activation_e4m3");
    return;
  }
  ENGINE_DISPATCH_DTYPE(dt, launch_pdl(gated_e4m3_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(512), s,
                                       static_cast<const T*>(gu), static_cast<T*>(out), inter, act, b, qa));
  check_launch("gated_activation_e4m3");
}

void gated_activation(const void* gu, void* out, DType dt, int64_t rows, int64_t inter, Act act, const float* b,
                      cudaStream_t s, const RowDelta& d) {
  const bool vec = inter % 8 == 0;
  const int64_t per_row = vec ? inter / 8 : inter;
  const size_t es = dtype_size(dt);
  // The grid's y dimension takes up to 65535 rows: larger batches (the MoE layers' token x expert rows) go in parts.
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
    const int64_t n = std::min<int64_t>(65535, rows - r0);
    const void* g = static_cast<const char*>(gu) + static_cast<size_t>(r0 * 2 * inter) * es;
    void* o = static_cast<char*>(out) + static_cast<size_t>(r0 * inter) * es;
    RowDelta part = d;
    if (part.delta != nullptr) part.at += r0;
    const dim3 grid(static_cast<unsigned>((per_row + kThreads - 1) / kThreads), static_cast<unsigned>(n));
    if (vec) {
      ENGINE_DISPATCH_DTYPE(dt, (launch_pdl(gated_kernel<T, 8>, grid, dim3(kThreads), s, static_cast<const T*>(g),
                                            static_cast<T*>(o), inter, act, b, part)));
    } else {
      ENGINE_DISPATCH_DTYPE(dt, (launch_pdl(gated_kernel<T, 1>, grid, dim3(kThreads), s, static_cast<const T*>(g),
                                            static_cast<T*>(o), inter, act, b, part)));
    }
    check_launch("gated_activation");
  }
}

void activation(void* x, DType dt, int64_t rows, int64_t n, Act act, const float* b, cudaStream_t s) {
  if (rows == 0) return;
  ENGINE_DISPATCH_DTYPE(dt, act_kernel<T><<<grid_for(rows * n), kThreads, 0, s>>>(static_cast<T*>(x), rows, n, act, b));
  check_launch("activation");
}

void add_bias(float* y, const float* b, int64_t rows, int64_t n, cudaStream_t s) {
  if (rows == 0) return;
  add_bias_kernel<<<grid_for(rows * n), kThreads, 0, s>>>(y, b, rows, n);
  check_launch("add_bias");
}

void add_norm(const float* y, float* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
              cudaStream_t s) {
  if (rows == 0) return;
  const int threads = dim <= 4096 ? 256 : dim <= 8192 ? 512 : 1024;
  launch_pdl(add_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(threads), s, y, x, dim, w, b, eps);
  check_launch("add_norm");
}

void soft_cap(float* x, int64_t n, float cap, cudaStream_t s) {
  if (n == 0) return;
  launch_pdl(soft_cap_kernel, dim3(grid_for(n)), dim3(kThreads), s, x, n, cap);
  check_launch("soft_cap");
}

void gather_rows(const float* src, const int32_t* rows_idx, float* dst, int64_t rows, int64_t n, cudaStream_t s) {
  if (rows == 0) return;
  launch_pdl(gather_rows_kernel, dim3(static_cast<unsigned>(rows)), dim3(256), s, src, rows_idx, dst, n);
  check_launch("gather_rows");
}

void convert(const float* src, void* dst, DType dt, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  ENGINE_DISPATCH_DTYPE(dt, convert_kernel<T><<<grid_for(n), kThreads, 0, s>>>(src, static_cast<T*>(dst), n));
  check_launch("convert");
}

void mask_columns(float* x, int64_t rows, int64_t cols, int64_t real, cudaStream_t s) {
  if (rows == 0 || real >= cols) return;
  mask_kernel<<<grid_for(rows * (cols - real)), kThreads, 0, s>>>(x, rows, cols, real);
  check_launch("mask_columns");
}

void assemble_vocab(const float* all, int32_t tp, int64_t rows, int64_t vl, int64_t vocab, float* out, cudaStream_t s) {
  if (rows == 0) return;
  assemble_kernel<<<grid_for(rows * vocab), kThreads, 0, s>>>(all, tp, rows, vl, vocab, out);
  check_launch("assemble_vocab");
}

void fill_dummy(void* dst, bool f32, DType dt, int64_t rows, int64_t cols, int64_t ld, uint64_t seed, uint32_t tensor,
                int64_t row0, int64_t col0, int64_t global_cols, float scale, cudaStream_t s) {
  if (rows * cols == 0) return;
  if (f32) {
    fill_dummy_kernel<float><<<grid_for(rows * cols), kThreads, 0, s>>>(static_cast<float*>(dst), rows, cols, ld, seed,
                                                                         tensor, row0, col0, global_cols, scale);
  } else {
    ENGINE_DISPATCH_DTYPE(dt, fill_dummy_kernel<T><<<grid_for(rows * cols), kThreads, 0, s>>>(
                                  static_cast<T*>(dst), rows, cols, ld, seed, tensor, row0, col0, global_cols, scale));
  }
  check_launch("fill_dummy");
}

void fill_constant(float* dst, int64_t n, float value, cudaStream_t s) {
  if (n == 0) return;
  fill_constant_kernel<<<grid_for(n), kThreads, 0, s>>>(dst, n, value);
  check_launch("fill_constant");
}

}  // namespace engine::cuda
