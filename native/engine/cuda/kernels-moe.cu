// Mixture-of-experts kernels: routing (the router over the RMS-normalised fp32 residual stream, softmax, top k),
// the permutation of (token, slot) pairs into expert-contiguous rows, the gather of those rows, a GEMV over only
// the active experts' weights for decode-sized batches, and the weighted combine back into the residual stream.
#include <mma.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/kernels.h"

namespace engine::cuda {
namespace {

constexpr int kRouterWarps = 8;     // experts per router block, one per warp
constexpr int kMaxExpertsPerLane = 16;  // top-k keeps a token's logits in registers: up to 512 experts

// Block (token t, experts blockIdx.y * 8 ..): the token's row normalised into shared memory (fp32, as the CPU model
// routes), then one expert's logit per warp with 16-byte loads of the fp32 router row.
__global__ void router_kernel(const float* __restrict__ x, const float* __restrict__ norm_w, float eps,
                              const float* __restrict__ router, int64_t H, int32_t E, float* logits) {
  extern __shared__ float xs[];  // [H]
  __shared__ float red[kRouterWarps];
  const int64_t t = blockIdx.x;
  const float* xr = x + t * H;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = xr[i];
    xs[i] = v;
    ss += v * v;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kRouterWarps; ++w) total += red[w];
  const float inv = rsqrtf(total / static_cast<float>(H) + eps);
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) xs[i] = xs[i] * inv * norm_w[i];
  __syncthreads();
  const int e = blockIdx.y * kRouterWarps + warp;
  if (e >= E) return;
  const float* wr = router + static_cast<int64_t>(e) * H;
  float acc = 0;
#pragma unroll 4
  for (int64_t i = lane * 4; i < H; i += 128) {
    const float4 w4 = __ldg(reinterpret_cast<const float4*>(wr + i));
    const float4 x4 = *reinterpret_cast<const float4*>(xs + i);
    acc += w4.x * x4.x + w4.y * x4.y + w4.z * x4.z + w4.w * x4.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) logits[t * E + e] = acc;
}

// One warp, one token: softmax over its router logits, top k by k rounds of a warp argmax (ties to the lower
// index), into ids[t * k + s] / weights[t * k + s].
__device__ void topk_token(const float* __restrict__ logits, int64_t t, int32_t E, int32_t k, bool renormalize,
                           int32_t* ids, float* weights) {
  const int lane = threadIdx.x & 31;
  float v[kMaxExpertsPerLane];
  float top = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kMaxExpertsPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < E ? logits[t * E + e] : -FLT_MAX;
    top = fmaxf(top, v[j]);
  }
  for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kMaxExpertsPerLane; ++j)
    if (lane + 32 * j < E) sum += __expf(v[j] - top);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  float chosen = 0;
  for (int s = 0; s < k; ++s) {
    float best = -FLT_MAX;
    int best_e = E;
#pragma unroll
    for (int j = 0; j < kMaxExpertsPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < E && (v[j] > best || (v[j] == best && e < best_e))) {
        best = v[j];
        best_e = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    const float p = __expf(best - top) / sum;
    chosen += p;
    if (lane == 0) {
      ids[t * k + s] = best_e;
      weights[t * k + s] = p;
    }
#pragma unroll
    for (int j = 0; j < kMaxExpertsPerLane; ++j)
      if (lane + 32 * j == best_e) v[j] = -FLT_MAX;
  }
  if (renormalize && lane == 0)
    for (int s = 0; s < k; ++s) weights[t * k + s] /= chosen;
}

__global__ void topk_kernel(const float* __restrict__ logits, int64_t rows, int32_t E, int32_t k, bool renormalize,
                            int32_t* ids, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t < rows) topk_token(logits, t, E, k, renormalize, ids, weights);
}

constexpr int kPermuteThreads = 1024;  // one block; one thread per local expert in the scans (n_local <= 1024)

// Inclusive prefix sums of three values over a warp's lanes.
__device__ int3 warp_scan3(int3 v) {
  const int lane = threadIdx.x & 31;
  for (int o = 1; o < 32; o <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, v.x, o), b = __shfl_up_sync(0xffffffffu, v.y, o),
              c = __shfl_up_sync(0xffffffffu, v.z, o);
    if (lane >= o) {
      v.x += a;
      v.y += b;
      v.z += c;
    }
  }
  return v;
}

// Exclusive prefix sums of three per-thread values over a block of kPermuteThreads, and their totals: warp scans,
// then the warps' totals scanned by warp 0 (`scratch`: 3 * 32 ints of shared memory).
__device__ void block_scan3(int3 v, int3& before, int3& total, int* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int3 inc = warp_scan3(v);
  if (lane == 31) {
    scratch[warp] = inc.x;
    scratch[32 + warp] = inc.y;
    scratch[64 + warp] = inc.z;
  }
  __syncthreads();
  if (warp == 0) {
    const int3 w = warp_scan3(make_int3(scratch[lane], scratch[32 + lane], scratch[64 + lane]));
    scratch[lane] = w.x;  // inclusive over warps
    scratch[32 + lane] = w.y;
    scratch[64 + lane] = w.z;
  }
  __syncthreads();
  const int3 prev = warp == 0 ? make_int3(0, 0, 0) : make_int3(scratch[warp - 1], scratch[32 + warp - 1], scratch[64 + warp - 1]);
  before = make_int3(prev.x + inc.x - v.x, prev.y + inc.y - v.y, prev.z + inc.z - v.z);
  total = make_int3(scratch[31], scratch[63], scratch[95]);
}

// One block: counts of the local experts, their exclusive offsets, the list of active ones and the 64-row tiles of
// their rows (all three by one block scan), then each (token, slot) entry's row in expert-contiguous order
// (slot_row; -1 for another rank's expert) and each row's token. `counts`: 2 * n_local + 96 ints of shared memory.
__device__ void permute_block(const int32_t* ids, int64_t entries, int32_t k, int32_t e0, int32_t n_local,
                              int32_t* counts, int32_t* offsets, int32_t* active, int32_t* tiles, int32_t* slot_row,
                              int32_t* row_token) {
  int32_t* cursor = counts + n_local;
  int* scratch = cursor + n_local;
  for (int e = threadIdx.x; e < n_local; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < entries; i += blockDim.x) {
    const int32_t e = ids[i] - e0;
    if (e >= 0 && e < n_local) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  const int e = threadIdx.x;
  const int32_t c = e < n_local ? counts[e] : 0;
  int3 before, total;
  block_scan3(make_int3(c, c > 0 ? 1 : 0, (c + kMoeTileRows - 1) / kMoeTileRows), before, total, scratch);
  if (e < n_local) {
    offsets[e] = before.x;
    cursor[e] = before.x;
    if (c > 0) active[before.y] = e;
    for (int32_t r = 0, i = before.z; r < c; r += kMoeTileRows, ++i) {
      tiles[1 + 2 * i] = e;
      tiles[2 + 2 * i] = before.x + r;
    }
  }
  if (threadIdx.x == 0) {
    offsets[n_local] = total.x;
    active[n_local] = total.y;
    tiles[0] = total.z;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < entries; i += blockDim.x) {
    const int32_t e = ids[i] - e0;
    if (e >= 0 && e < n_local) {
      const int32_t row = atomicAdd(&cursor[e], 1);
      slot_row[i] = row;
      row_token[row] = static_cast<int32_t>(i / k);
    } else {
      slot_row[i] = -1;
    }
  }
}

__global__ void permute_kernel(const int32_t* __restrict__ ids, int64_t entries, int32_t k, int32_t e0, int32_t n_local,
                               int32_t* offsets, int32_t* active, int32_t* tiles, int32_t* slot_row,
                               int32_t* row_token) {
  extern __shared__ int32_t counts[];
  permute_block(ids, entries, k, e0, n_local, counts, offsets, active, tiles, slot_row, row_token);
}

// Decode-sized batches: the top k of every token (a warp each) and the permutation in one block, the ids kept in
// shared memory.
__global__ void topk_permute_kernel(const float* __restrict__ logits, int64_t rows, int32_t E, int32_t k,
                                    bool renormalize, float* weights, int32_t e0, int32_t n_local, int32_t* offsets,
                                    int32_t* active, int32_t* tiles, int32_t* slot_row, int32_t* row_token) {
  extern __shared__ int32_t smem_ids[];  // [rows * k] ids, then 2 * n_local counts
  const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int64_t t = warp; t < rows; t += warps) topk_token(logits, t, E, k, renormalize, smem_ids, weights);
  __syncthreads();
  permute_block(smem_ids, rows * k, k, e0, n_local, smem_ids + rows * k, offsets, active, tiles, slot_row, row_token);
}

template <typename T>
__global__ void gather_kernel(const T* __restrict__ xn, const int32_t* __restrict__ row_token,
                              const int32_t* __restrict__ total, int64_t H, T* xp) {
  const int64_t row = blockIdx.x;
  if (row >= *total) return;
  const T* src = xn + static_cast<int64_t>(row_token[row]) * H;
  T* dst = xp + row * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) dst[i] = src[i];
}

constexpr int kGemvWarps = 4;  // one output row per warp
constexpr int kGroup = 4;      // token rows multiplied per pass over a weight row
constexpr int kUnroll = 8;     // 16-byte weight loads in flight per lane: a whole 2,048-wide bf16 row per warp

// y[row, o] = x_row · W_e[o, :] for the rows of active expert blockIdx.y, o over blockIdx.x's rows. The weight
// row is streamed once per group of kGroup token rows (decode batches have one or two rows per expert). x_row is
// x[row_token[row]] when row_token is set (the gather done on the way in), else x[row].
template <typename T, typename OutT>
__global__ void __launch_bounds__(kGemvWarps * 32)
    expert_gemv_kernel(const void* const* __restrict__ w, const int32_t* __restrict__ offsets,
                       const int32_t* __restrict__ active, int32_t n_local, const T* __restrict__ x,
                       const int32_t* __restrict__ row_token, int64_t n, int64_t k, OutT* y) {
  if (static_cast<int32_t>(blockIdx.y) >= active[n_local]) return;
  const int32_t e = active[blockIdx.y];
  const int32_t r0 = offsets[e], r1 = offsets[e + 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (o >= n) return;
  const T* wr = static_cast<const T*>(w[e]) + o * k;
  for (int32_t g = r0; g < r1; g += kGroup) {
    float acc[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) acc[j] = 0;
    const int rows = min(kGroup, r1 - g);
    for (int64_t base = lane * 8; base < k; base += 32 * 8 * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * 256;
        wv[u] = i < k ? __ldg(reinterpret_cast<const uint4*>(wr + i)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * 256;
        if (i >= k) break;
        const T* wt = reinterpret_cast<const T*>(&wv[u]);
        float wf[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) wf[q] = to_float(wt[q]);
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          if (j >= rows) break;
          const int64_t xr = row_token ? row_token[g + j] : g + j;
          const uint4 xv = *reinterpret_cast<const uint4*>(x + xr * k + i);
          const T* xt = reinterpret_cast<const T*>(&xv);
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[j] += wf[q] * to_float(xt[q]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      if (j >= rows) break;
      float v = acc[j];
      for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
      if (lane == 0) y[static_cast<int64_t>(g + j) * n + o] = from_float<OutT>(v);
    }
  }
}

// The tensor-core path for larger batches: block (column tile blockIdx.x, row tile blockIdx.y of moe_permute's
// list) computes a 64 x 64 tile of y = x · W_eᵀ with WMMA (16x16x16, fp32 accumulate), k in steps of 32 through
// shared memory. Rows past the expert's segment and columns past n are zero-filled / not written.
constexpr int kTN = 64, kTK = 32, kMmaThreads = 128;
template <typename T, typename OutT>
__global__ void __launch_bounds__(kMmaThreads)
    expert_mma_kernel(const void* const* __restrict__ w, const int32_t* __restrict__ tiles,
                      const int32_t* __restrict__ offsets, const T* __restrict__ x, int64_t n, int64_t k, OutT* y) {
  using namespace nvcuda;
  constexpr int kTM = kMoeTileRows, kLd = kTK + 8, kLdc = kTN + 4;
  __shared__ __align__(128) T as[kTM * kLd];
  __shared__ __align__(128) T bs[kTN * kLd];
  __shared__ __align__(128) float cs[kTM * kLdc];
  const int32_t tile = blockIdx.y;
  if (tile >= tiles[0]) return;
  const int32_t e = tiles[1 + 2 * tile], r0 = tiles[2 + 2 * tile];
  const int32_t r_end = min(r0 + kTM, offsets[e + 1]);
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTN;
  const T* W = static_cast<const T*>(w[e]);
  const int warp = threadIdx.x >> 5, wm = warp >> 1, wn = warp & 1;  // each warp: 32 x 32 of the tile
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += kTK) {
    // 64 rows x 32 columns of each operand = 256 chunks of 8 elements: two per thread (k % 8 == 0, so a chunk is
    // wholly inside or outside k).
#pragma unroll
    for (int c = threadIdx.x; c < kTM * kTK / 8; c += kMmaThreads) {
      const int row = c / (kTK / 8), col = (c % (kTK / 8)) * 8;
      const int64_t kk = k0 + col;
      uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
      if (r0 + row < r_end && kk < k) a = *reinterpret_cast<const uint4*>(x + static_cast<int64_t>(r0 + row) * k + kk);
      if (n0 + row < n && kk < k) b = __ldg(reinterpret_cast<const uint4*>(W + (n0 + row) * k + kk));
      *reinterpret_cast<uint4*>(as + row * kLd + col) = a;
      *reinterpret_cast<uint4*>(bs + row * kLd + col) = b;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], as + (wm * 32 + i * 16) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], bs + (wn * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * kLdc + wn * 32 + j * 16, acc[i][j], kLdc, wmma::mem_row_major);
  __syncthreads();
  for (int idx = threadIdx.x; idx < kTM * kTN; idx += kMmaThreads) {
    const int row = idx / kTN, col = idx % kTN;
    if (r0 + row < r_end && n0 + col < n)
      y[static_cast<int64_t>(r0 + row) * n + n0 + col] = from_float<OutT>(cs[row * kLdc + col]);
  }
}

// out[t, j] = base[t, j] (0 without base) + sum_s weight[t, s] * y[slot_row[t, s], j] (slots of other ranks' experts
// skipped) + sigmoid(xn[t] · gate_w) * shared[t, j] (when shared is set; the gate's dot product by this block).
template <typename T>
__global__ void combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ slot_row,
                               const float* __restrict__ weights, int32_t k, int64_t H, const float* base,
                               const float* __restrict__ shared, const T* __restrict__ xn,
                               const float* __restrict__ gate_w, float* out) {
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * blockDim.x;
  float g = 0.0f;
  if (shared) {
    float dot = 0;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) dot += to_float(xn[t * H + j]) * gate_w[j];
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = dot;
    __syncthreads();
    float total = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += red[w];
    g = 1.0f / (1.0f + __expf(-total));
  }
  for (int64_t j = j0 + threadIdx.x; j < min(H, j0 + static_cast<int64_t>(blockDim.x)); j += blockDim.x) {
    float v = base ? base[t * H + j] : 0.0f;
    for (int s = 0; s < k; ++s) {
      const int32_t row = slot_row[t * k + s];
      if (row >= 0) v += weights[t * k + s] * y[static_cast<int64_t>(row) * H + j];
    }
    if (shared) v += g * shared[t * H + j];
    out[t * H + j] = v;
  }
}

void check_grid_rows(int64_t rows, const char* what) {
  if (rows > 0x7fffffff) throw EngineError(ErrorCode::internal, std::string(what) + " over too many rows");
}

}  // namespace

int64_t moe_max_tiles(int64_t entries, int32_t n_local) {
  return entries / kMoeTileRows + std::min<int64_t>(n_local, entries) + 1;
}

void moe_route(const float* x, int64_t rows, int64_t hidden, const float* norm_w, float eps, const float* router,
               int32_t num_experts, int32_t top_k, bool renormalize, float* logits, int32_t* ids, float* weights,
               cudaStream_t s) {
  moe_router_logits(x, rows, hidden, norm_w, eps, router, num_experts, logits, s);
  if (rows == 0) return;
  topk_kernel<<<static_cast<unsigned>((rows + 3) / 4), 128, 0, s>>>(logits, rows, num_experts, top_k, renormalize, ids,
                                                                    weights);
  check_launch("moe_route (top k)");
}

void moe_topk_permute(const float* logits, int64_t rows, int32_t num_experts, int32_t top_k, bool renormalize,
                      float* weights, int32_t expert_begin, int32_t n_local, int32_t* offsets, int32_t* active,
                      int32_t* tiles, int32_t* slot_row, int32_t* row_token, cudaStream_t s) {
  if (rows == 0) return;
  const size_t smem = sizeof(int32_t) * static_cast<size_t>(rows * top_k + 2 * n_local + 96);
  if (smem > 48 * 1024 || n_local > kPermuteThreads)
    throw EngineError(ErrorCode::internal, "moe_topk_permute over " + std::to_string(rows) + " rows of " +
                                               std::to_string(n_local) + " experts: too many for one block");
  topk_permute_kernel<<<1, kPermuteThreads, smem, s>>>(logits, rows, num_experts, top_k, renormalize, weights, expert_begin,
                                            n_local, offsets, active, tiles, slot_row, row_token);
  check_launch("moe_topk_permute");
}

void moe_router_logits(const float* x, int64_t rows, int64_t hidden, const float* norm_w, float eps,
                       const float* router, int32_t num_experts, float* logits, cudaStream_t s) {
  if (rows == 0) return;
  check_grid_rows(rows, "moe_router_logits");
  if (num_experts > 32 * kMaxExpertsPerLane)
    throw EngineError(ErrorCode::unsupported, "the CUDA backend routes up to " + std::to_string(32 * kMaxExpertsPerLane) +
                                                  " experts, got num_experts " + std::to_string(num_experts));
  if (hidden % 4 != 0)
    throw EngineError(ErrorCode::unsupported, "moe_route needs hidden_size % 4 == 0, got " + std::to_string(hidden));
  const size_t smem = sizeof(float) * static_cast<size_t>(hidden);
  if (smem > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(router_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
               "moe_route shared memory");
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((num_experts + kRouterWarps - 1) / kRouterWarps));
  router_kernel<<<grid, kRouterWarps * 32, smem, s>>>(x, norm_w, eps, router, hidden, num_experts, logits);
  check_launch("moe_router_logits");
}

void moe_permute(const int32_t* ids, int64_t rows, int32_t top_k, int32_t expert_begin, int32_t n_local,
                 int32_t* offsets, int32_t* active, int32_t* tiles, int32_t* slot_row, int32_t* row_token,
                 cudaStream_t s) {
  if (rows == 0) return;
  if (n_local > kPermuteThreads)
    throw EngineError(ErrorCode::unsupported, "the CUDA backend holds up to " + std::to_string(kPermuteThreads) +
                                                  " experts per rank, got " + std::to_string(n_local));
  permute_kernel<<<1, kPermuteThreads, sizeof(int32_t) * (2 * static_cast<size_t>(n_local) + 96), s>>>(
      ids, rows * top_k, top_k, expert_begin, n_local, offsets, active, tiles, slot_row, row_token);
  check_launch("moe_permute");
}

void moe_gather(const void* xn, DType dt, const int32_t* row_token, const int32_t* total, int64_t max_rows,
                int64_t hidden, void* xp, cudaStream_t s) {
  if (max_rows == 0) return;
  check_grid_rows(max_rows, "moe_gather");
  ENGINE_DISPATCH_DTYPE(dt, (gather_kernel<T><<<static_cast<unsigned>(max_rows), 256, 0, s>>>(
                                static_cast<const T*>(xn), row_token, total, hidden, static_cast<T*>(xp))));
  check_launch("moe_gather");
}

void moe_expert_gemv(const void* const* w, const int32_t* offsets, const int32_t* active, int32_t n_local,
                     int32_t max_active, const void* x, const int32_t* row_token, DType dt, int64_t n, int64_t k,
                     void* y, bool y_f32, cudaStream_t s) {
  if (max_active == 0) return;
  if (k % 8 != 0)
    throw EngineError(ErrorCode::unsupported, "moe_expert_gemv needs the reduced dimension to be a multiple of 8, got " +
                                                  std::to_string(k));
  const dim3 grid(static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps), static_cast<unsigned>(max_active));
  if (y_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (expert_gemv_kernel<T, float><<<grid, kGemvWarps * 32, 0, s>>>(
                                  w, offsets, active, n_local, static_cast<const T*>(x), row_token, n, k,
                                  static_cast<float*>(y))));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (expert_gemv_kernel<T, T><<<grid, kGemvWarps * 32, 0, s>>>(
                                  w, offsets, active, n_local, static_cast<const T*>(x), row_token, n, k,
                                  static_cast<T*>(y))));
  }
  check_launch("moe_expert_gemv");
}

void moe_expert_mma(const void* const* w, const int32_t* tiles, const int32_t* offsets, int64_t max_tiles,
                    const void* x, DType dt, int64_t n, int64_t k, void* y, bool y_f32, cudaStream_t s) {
  if (max_tiles == 0) return;
  if (k % 8 != 0)
    throw EngineError(ErrorCode::unsupported, "moe_expert_mma needs the reduced dimension to be a multiple of 8, got " +
                                                  std::to_string(k));
  check_grid_rows(max_tiles, "moe_expert_mma");
  const dim3 grid(static_cast<unsigned>((n + kTN - 1) / kTN), static_cast<unsigned>(max_tiles));
  if (y_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (expert_mma_kernel<T, float><<<grid, kMmaThreads, 0, s>>>(
                                  w, tiles, offsets, static_cast<const T*>(x), n, k, static_cast<float*>(y))));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (expert_mma_kernel<T, T><<<grid, kMmaThreads, 0, s>>>(
                                  w, tiles, offsets, static_cast<const T*>(x), n, k, static_cast<T*>(y))));
  }
  check_launch("moe_expert_mma");
}

void moe_combine(const float* y, const int32_t* slot_row, const float* weights, int64_t rows, int32_t top_k,
                 int64_t hidden, const float* base, const float* shared, const void* xn, DType dt,
                 const float* shared_gate_w, float* out, cudaStream_t s) {
  if (rows == 0) return;
  check_grid_rows(rows, "moe_combine");
  // A block per token and 256 columns: one element a thread, its k loads in flight together (decode batches have
  // few tokens, and one block a token left the step waiting on a chain of loads).
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((hidden + 255) / 256));
  ENGINE_DISPATCH_DTYPE(dt, (combine_kernel<T><<<grid, 256, 0, s>>>(
                                y, slot_row, weights, top_k, hidden, base, shared, static_cast<const T*>(xn),
                                shared_gate_w, out)));
  check_launch("moe_combine");
}

}  // namespace engine::cuda
