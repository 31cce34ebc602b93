// The grouped LoRA kernels (lora-kernels.h). A decode step's deltas are tiny products bound by reading the
// adapters' A and B (rank 16 on the 8B shape: 128-460 KB per adapter and projection) and by latency, so:
//  - a thread block serves a tile of up to kLoraTileRows rows of ONE slot (lora-rows.h), so each adapter's
//    matrices are read once per tile, not once per row;
//  - shrink: block (RPB rank rows, slice of kLoraKSlice input columns, tile): each lane makes one 16-byte load of
//    A per rank row and of x per tile row, all in flight at once, keeps [RPB][tile rows] sums in registers, and
//    the 8 warps meet in shared memory; the slices' partial sums go to scratch (no atomics: deterministic). RPB
//    grows with the tile count: few tiles (batch 1) want many blocks, many (prefill) want x read fewer times;
//  - expand: block (512 output columns, tile): the tile's t rows (its slices summed) are staged in shared memory
//    and each thread owns 4 adjacent columns: it reads their B rows (4 x rank contiguous values) once and adds the
//    dot products into y with one vector read-modify-write per row, so y is touched once without atomics;
//  - both may launch with programmatic dependent launch (pdl.cuh): tiles, the descriptor table and the adapters'
//    matrices are written by the host before the step, never by its kernels, so they are read — A and B into
//    registers — before waiting for the previous kernel; after the wait only x (shrink) or t and y (expand) are
//    read, in one round of loads;
//  - tiles are the grids' slowest dimension: a graph's grid covers the most tiles its batch size can have, and
//    the blocks of the empty ones come last;
//  - the expand's delta form (kDelta) and lora_add split it for steps of 9-256 rows: the deltas are computed on the
//    shrink's forked stream beside the product, into a buffer of their own, and what waits for the product is only
//    a read-modify-write of y with the deltas (no descriptors, B or t chain after the wait) — or nothing, where the
//    next kernel adds them as it reads y (the gated activation, rope / attention: kernels.h's RowDelta), which pays
//    at any size.
// Measured on an H200, Llama-3-8B shape, 8 adapters of rank 16 on all 7 modules, rows round-robin, decode graphs
// (cuda-bench --lora 8,16): under ncu the expand after the product took 11.9 µs a projection at batch 64 (one block
// of 4 warps an SM: 166 registers, a chain of dependent loads) and 6 µs at batch 1. Split, batch 64 went from +28..29%
// to +24..26% a step; at batch 1 the split cost more (+15.5% against +11%: the two kernels on the side stream slow the
// GEMVs beside them more than the expand after them costs), hence the 9-row floor for the projections whose deltas
// lora_add adds (bench/RESULTS.md, 2026-11-28).
#include <string>
#include <type_traits>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/gemv-common.cuh"
#include "cuda/lora-kernels.h"
#include "cuda/lora-slices.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kShrinkWarps = 8;
constexpr int kChunk = gemv_common::kChunk;  // 16-bit elements per 16-byte load
static_assert(kLoraKSlice == kShrinkWarps * 32 * kChunk, "a shrink block reads one chunk per lane");
constexpr int kExpandThreads = 128;
constexpr int kExpandCols = 4;  // adjacent output columns per thread
constexpr int kExpandBlockCols = kExpandThreads * kExpandCols;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}


// XT: T (x as the projection reads it) or float (the residual stream, times the norm weight; the expand applies
// the rows' 1 / rms).
template <typename T, typename XT, int RPB>
__global__ void __launch_bounds__(kShrinkWarps * 32)
    lora_shrink_kernel(LoraRowsDev r, const LoraTargetDesc* __restrict__ table, int64_t slot_stride,
                       const XT* __restrict__ x, int64_t ldx, int64_t in, const float* __restrict__ norm_w,
                       float* __restrict__ t, int64_t ldt, int64_t slice_stride) {
  constexpr bool kNorm = std::is_same_v<XT, float>;
  constexpr int M = kLoraTileRows;
  constexpr int kParts = RPB * M + (kNorm ? M : 0);
  __shared__ float part[kShrinkWarps][kParts];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t r0 = static_cast<int32_t>(blockIdx.x) * RPB;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kLoraKSlice + (static_cast<int64_t>(warp) * 32 + lane) * kChunk;

  // Before the wait: which tile, its rows, and this lane's chunk of A (the host wrote them before the step).
  const LoraTile tile = r.tiles[blockIdx.z];
  bool active = tile.count > 0;
  uint4 araw[RPB];
  const XT* xr[M];
  if (active) {
    const LoraTargetDesc* d = table + tile.slot * slot_stride;
    active = r0 < d->rank;  // ranks are padded to 8 and RPB divides 8: a block's rank rows all exist
    if (active && k < in) {
      const T* a = static_cast<const T*>(d->a) + static_cast<int64_t>(r0) * in + k;
#pragma unroll
      for (int j = 0; j < RPB; ++j) araw[j] = __ldg(reinterpret_cast<const uint4*>(a + j * in));
    }
#pragma unroll
    for (int i = 0; i < M; ++i)
      xr[i] = x + static_cast<int64_t>(r.rows[tile.begin + (i < tile.count ? i : 0)]) * ldx + k;
  }
  pdl_enter();
  if (!active) return;

  const int m = tile.count;
  float acc[RPB][M], ss[M];
#pragma unroll
  for (int i = 0; i < M; ++i) {
    ss[i] = 0;
#pragma unroll
    for (int j = 0; j < RPB; ++j) acc[j][i] = 0;
  }
  if (k < in) {
    float g[kChunk];
    if constexpr (kNorm) gemv_common::load_chunk(norm_w + k, g);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= m) break;
      float xv[kChunk];
      gemv_common::load_chunk(xr[i], xv);
      if constexpr (kNorm) {
#pragma unroll
        for (int e = 0; e < kChunk; ++e) {
          ss[i] += xv[e] * xv[e];
          xv[e] *= g[e];
        }
      }
#pragma unroll
      for (int j = 0; j < RPB; ++j) {
        float av[kChunk];
        gemv_common::unpack<T>(araw[j], av);
#pragma unroll
        for (int e = 0; e < kChunk; ++e) acc[j][i] += av[e] * xv[e];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    if (i >= m) break;
#pragma unroll
    for (int j = 0; j < RPB; ++j) acc[j][i] = warp_sum(acc[j][i]);
    if constexpr (kNorm) ss[i] = warp_sum(ss[i]);
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= m) break;
#pragma unroll
      for (int j = 0; j < RPB; ++j) part[warp][j * M + i] = acc[j][i];
      if constexpr (kNorm) part[warp][RPB * M + i] = ss[i];
    }
  }
  __syncthreads();
  float* ts = t + static_cast<int64_t>(blockIdx.y) * slice_stride;
  // The rank rows' sums, then (one block per slice) the rows' sums of squares.
  const int outputs = RPB * M + (kNorm && blockIdx.x == 0 ? M : 0);
  for (int o = threadIdx.x; o < outputs; o += blockDim.x) {
    const int i = o % M;
    if (i >= m) continue;
    float v = 0;
#pragma unroll
    for (int w = 0; w < kShrinkWarps; ++w) v += part[w][o];
    const int64_t col = o < RPB * M ? r0 + o / M : ldt - 1;
    ts[static_cast<int64_t>(tile.begin + i) * ldt + col] = v;
  }
}

// 4 adjacent values of y, read and written as one vector: fp32 (16 bytes) or 16-bit (8 bytes).
__device__ __forceinline__ void load4(const float* p, float (&v)[kExpandCols]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void store4(float* p, const float (&v)[kExpandCols]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T>
__device__ __forceinline__ void load4(const T* p, float (&v)[kExpandCols]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int j = 0; j < kExpandCols; ++j) v[j] = to_float(e[j]);
}
template <typename T>
__device__ __forceinline__ void store4(T* p, const float (&v)[kExpandCols]) {
  uint2 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int j = 0; j < kExpandCols; ++j) e[j] = from_float<T>(v[j]);
  *reinterpret_cast<uint2*>(p) = raw;
}

// B chunks (8 ranks each) of a column held in registers from before the wait: ranks up to 16 (the rest are read
// after it).
constexpr int kRegChunks = 2;

// vec: y's rows allow 4-column vector accesses (ldy % 4 == 0, y aligned); columns past n are never touched.
// kDelta: y is the fp32 delta buffer, its row p the p-th grouped row (not rows[p]), written rather than added to,
// zeros where no segment covers a column (lora_add adds every column of it).
template <typename T, typename OutT, bool kDelta>
__global__ void __launch_bounds__(kExpandThreads)
    lora_expand_kernel(LoraRowsDev r, const LoraTargetDesc* __restrict__ table, int64_t slot_stride,
                       const float* __restrict__ t, int64_t ldt, int64_t slice_stride, int32_t slices, bool norm,
                       int64_t in, float eps, int64_t n, OutT* y, int64_t ldy, bool vec) {
  static_assert(!kDelta || std::is_same_v<OutT, float>, "deltas are fp32");
  constexpr int M = kLoraTileRows, J = kExpandCols;
  __shared__ __align__(16) float ts[M][kLoraMaxRank];  // the tile's shrink outputs
  __shared__ float inv[M];
  // The tile's slot's descriptor, read once for the block (raw words: a __shared__ variable takes no initializer).
  __shared__ __align__(16) uint32_t desc_words[sizeof(LoraTargetDesc) / 4];
  LoraTargetDesc& desc = *reinterpret_cast<LoraTargetDesc*>(desc_words);
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kExpandBlockCols;
  const int64_t col0 = c0 + static_cast<int64_t>(threadIdx.x) * J;

  // Before the wait (all written by the host before the step): the tile, which segment covers each of this
  // thread's columns, and those columns' B rows, loaded — the expand's one read of adapter memory.
  const LoraTile tile = r.tiles[blockIdx.y];
  bool active = tile.count > 0;
  const LoraTargetDesc* d = &desc;
  int32_t seg_of[J], rk[J] = {0, 0, 0, 0}, toff[J] = {0, 0, 0, 0};
  const T* bcol[J] = {nullptr, nullptr, nullptr, nullptr};
  uint4 braw[J][kRegChunks];
  OutT* yrow[M];
  if (active) {
    // The descriptor into shared memory in one round of loads (the segment lookups below read it many times).
    static_assert(sizeof(LoraTargetDesc) % 4 == 0, "copied as words");
    const uint32_t* src = reinterpret_cast<const uint32_t*>(table + tile.slot * slot_stride);
    for (int w = threadIdx.x; w < static_cast<int>(sizeof(LoraTargetDesc) / 4); w += kExpandThreads)
      desc_words[w] = __ldg(src + w);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const int32_t p = tile.begin + (i < tile.count ? i : 0);
      yrow[i] = y + static_cast<int64_t>(kDelta ? p : r.rows[p]) * ldy;
    }
  }
  __syncthreads();  // (active is the same for the whole block)
  if (active) {
    // Only blocks whose columns some segment covers have work (the same answer for every thread).
    bool any = false;
    const int32_t n_seg = d->rank > 0 ? d->n_seg : 0;
    for (int s = 0; s < n_seg; ++s) {
      const LoraSegDesc& sg = d->seg[s];
      any = any || (sg.out_offset < c0 + kExpandBlockCols && sg.out_offset + sg.out > c0);
    }
    if constexpr (!kDelta) active = any;  // (a delta block without a segment writes its zeros)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      seg_of[j] = -1;
      for (int s = 0; s < n_seg && col0 + j < n; ++s) {
        const LoraSegDesc& sg = d->seg[s];
        const int64_t c = col0 + j - sg.out_offset;
        if (c >= 0 && c < sg.out) {
          seg_of[j] = s;
          rk[j] = sg.rank;
          toff[j] = sg.t_offset;
          bcol[j] = static_cast<const T*>(sg.b) + c * sg.rank;
          break;
        }
      }
#pragma unroll
      for (int q = 0; q < kRegChunks; ++q)
        if (q * kChunk < rk[j]) braw[j][q] = __ldg(reinterpret_cast<const uint4*>(bcol[j] + q * kChunk));
    }
  }
  pdl_enter();
  if (!active) return;

  const int m = tile.count;
  const int32_t rank = d->rank;
  const bool full = vec && col0 + J <= n;
  // y's values (the product just written) travel while the tile's t rows are summed into shared memory.
  float yv[M][J];
  if (full && !kDelta) {
#pragma unroll
    for (int i = 0; i < M; ++i)
      if (i < m) load4(yrow[i] + col0, yv[i]);
  }
  if (threadIdx.x < M) {
    const int i = threadIdx.x;
    float s = 1.0f;
    if (norm && i < m) {
      const float s2 = sum_slices(t + static_cast<int64_t>(tile.begin + i) * ldt + ldt - 1, slices, slice_stride);
      s = 1.0f / sqrtf(s2 / static_cast<float>(in) + eps);  // the norm kernel's (and gemv_rms's) 1 / rms
    }
    inv[i] = s;
  }
  // (One barrier for both: the rows' 1 / rms scale the sums at the end.)
  for (int o = threadIdx.x; o < m * rank; o += kExpandThreads) {
    const int i = o / rank, c = o - i * rank;
    ts[i][c] = sum_slices(t + static_cast<int64_t>(tile.begin + i) * ldt + c, slices, slice_stride);
  }
  __syncthreads();
  if (col0 >= n) return;
  float acc[M][J];
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) acc[i][j] = 0;
  // Adds b's chunk q (ranks 8q .. 8q + 7 of a segment whose t columns start at `off`) into column j.
  auto madd = [&](int j, const uint4& raw, int32_t off, int q) {
    float bv[kChunk];
    gemv_common::unpack<T>(raw, bv);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= m) break;
      const float4 t0 = *reinterpret_cast<const float4*>(&ts[i][off + q * kChunk]);
      const float4 t1 = *reinterpret_cast<const float4*>(&ts[i][off + q * kChunk + 4]);
      acc[i][j] += bv[0] * t0.x + bv[1] * t0.y + bv[2] * t0.z + bv[3] * t0.w + bv[4] * t1.x + bv[5] * t1.y +
                   bv[6] * t1.z + bv[7] * t1.w;
    }
  };
  bool hit = false;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (seg_of[j] < 0) continue;
    hit = true;
#pragma unroll
    for (int q = 0; q < kRegChunks; ++q)
      if (q * kChunk < rk[j]) madd(j, braw[j][q], toff[j], q);
    for (int q = kRegChunks; q * kChunk < rk[j]; ++q)  // ranks past 16
      madd(j, __ldg(reinterpret_cast<const uint4*>(bcol[j] + q * kChunk)), toff[j], q);
    // Further segments over the same column (an adapter giving both attn_qkv and attn_q, say).
    for (int s = seg_of[j] + 1; s < d->n_seg; ++s) {
      const LoraSegDesc sg = d->seg[s];
      const int64_t c = col0 + j - sg.out_offset;
      if (c < 0 || c >= sg.out) continue;
      const T* b = static_cast<const T*>(sg.b) + c * sg.rank;
      for (int q = 0; q * kChunk < sg.rank; ++q)
        madd(j, __ldg(reinterpret_cast<const uint4*>(b + q * kChunk)), sg.t_offset, q);
    }
  }
  if (!hit && !kDelta) return;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    if (i >= m) break;
    const float scale = inv[i];
#pragma unroll
    for (int j = 0; j < J; ++j) acc[i][j] *= scale;  // (0 for a column no segment covers)
    OutT* dst = yrow[i] + col0;
    if constexpr (kDelta) {
      if (full) {
        store4(dst, acc[i]);
      } else {
#pragma unroll
        for (int j = 0; j < J; ++j)
          if (col0 + j < n) dst[j] = acc[i][j];
      }
    } else if (full) {
#pragma unroll
      for (int j = 0; j < J; ++j) yv[i][j] += acc[i][j];
      store4(dst, yv[i]);
    } else {
      for (int j = 0; j < J && col0 + j < n; ++j) dst[j] = from_float<OutT>(to_float(dst[j]) + acc[i][j]);
    }
  }
}

// y[rows[p], c] += delta[p, c] for every grouped row p of the tiles and column c < n: the deltas lora_expand_delta
// wrote beside the product. Blocks of 512 columns walk the tiles with the stride grid_tiles (lora_grid_tiles).
template <typename OutT>
__global__ void __launch_bounds__(kExpandThreads)
    lora_add_kernel(LoraRowsDev r, const float* __restrict__ delta, int64_t ldd, int64_t n, OutT* y, int64_t ldy,
                    bool vec) {
  constexpr int M = kLoraTileRows, J = kExpandCols;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kExpandBlockCols + static_cast<int64_t>(threadIdx.x) * J;
  bool waited = false;
  for (int32_t z = static_cast<int32_t>(blockIdx.y); z < r.max_tiles; z += static_cast<int32_t>(gridDim.y)) {
    const LoraTile tile = r.tiles[z];  // (host-written: read before the wait)
    if (tile.count <= 0) break;
    OutT* yrow[M];
#pragma unroll
    for (int i = 0; i < M; ++i) yrow[i] = y + static_cast<int64_t>(r.rows[tile.begin + (i < tile.count ? i : 0)]) * ldy;
    if (!waited) {
      pdl_enter();
      waited = true;
    }
    if (col0 >= n) continue;
    const int m = tile.count;
    if (vec && col0 + J <= n) {
      float dv[M][J], yv[M][J];
#pragma unroll
      for (int i = 0; i < M; ++i)
        if (i < m) {
          load4(delta + static_cast<int64_t>(tile.begin + i) * ldd + col0, dv[i]);
          load4(yrow[i] + col0, yv[i]);
        }
#pragma unroll
      for (int i = 0; i < M; ++i)
        if (i < m) {
#pragma unroll
          for (int j = 0; j < J; ++j) yv[i][j] += dv[i][j];
          store4(yrow[i] + col0, yv[i]);
        }
    } else {
#pragma unroll
      for (int i = 0; i < M; ++i)
        if (i < m)
          for (int j = 0; j < J && col0 + j < n; ++j)
            yrow[i][col0 + j] = from_float<OutT>(to_float(yrow[i][col0 + j]) +
                                                 delta[static_cast<int64_t>(tile.begin + i) * ldd + col0 + j]);
    }
  }
}

template <typename T, typename XT>
void launch_shrink(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, int32_t max_rank,
                   const void* x, const float* norm_w, int64_t ldx, int64_t in, const LoraScratch& t, bool pdl,
                   cudaEvent_t done, cudaStream_t s) {
  const dim3 block(kShrinkWarps * 32);
  const XT* xt = static_cast<const XT*>(x);
  auto go = [&](auto rpb_tag) {
    constexpr int RPB = decltype(rpb_tag)::value;
    // Tiles slowest: the blocks of this step's tiles come first, those of a graph's empty ones last.
    const dim3 grid(static_cast<unsigned>((max_rank + RPB - 1) / RPB), static_cast<unsigned>(lora_k_slices(in)),
                    static_cast<unsigned>(rows.max_tiles));
    launch_ex(lora_shrink_kernel<T, XT, RPB>, grid, block, 0, s, pdl, done, rows, table, slot_stride, xt, ldx, in,
              norm_w, t.t, t.ldt, t.slice_stride);
  };
  // Few tiles (batch 1): one rank row per block, for enough blocks to keep the memory system busy; more tiles:
  // more rank rows per block, so that x is read fewer times (prefill rows are thousands).
  if (rows.max_tiles <= 2)
    go(std::integral_constant<int, 1>{});
  else if (rows.max_tiles <= 32)
    go(std::integral_constant<int, 4>{});
  else
    go(std::integral_constant<int, 8>{});
}

template <typename T, typename OutT, bool kDelta = false>
void launch_expand(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, const LoraScratch& t,
                   int64_t in, bool norm, float eps, int64_t n, void* y, int64_t ldy, bool pdl, cudaStream_t s,
                   cudaEvent_t done = nullptr) {
  const dim3 grid(blocks_for(n, kExpandBlockCols), static_cast<unsigned>(rows.max_tiles));  // tiles slowest
  const size_t align = sizeof(OutT) * kExpandCols;
  const bool vec = ldy % kExpandCols == 0 && reinterpret_cast<uintptr_t>(y) % align == 0;
  launch_ex(lora_expand_kernel<T, OutT, kDelta>, grid, dim3(kExpandThreads), 0, s, pdl, done, rows, table,
            slot_stride, t.t, t.ldt, t.slice_stride, lora_k_slices(in), norm, in, eps, n, static_cast<OutT*>(y), ldy,
            vec);
}

template <typename OutT>
void launch_add(const LoraRowsDev& rows, const float* delta, int64_t ldd, int64_t n, void* y, int64_t ldy, bool pdl,
                cudaStream_t s) {
  const dim3 grid(blocks_for(n, kExpandBlockCols), static_cast<unsigned>(rows.grid_tiles));
  const bool vec = ldy % kExpandCols == 0 && ldd % kExpandCols == 0 &&
                   reinterpret_cast<uintptr_t>(y) % (sizeof(OutT) * kExpandCols) == 0 &&
                   reinterpret_cast<uintptr_t>(delta) % 16 == 0;
  launch_ex(lora_add_kernel<OutT>, grid, dim3(kExpandThreads), 0, s, pdl, nullptr, rows, delta, ldd, n,
            static_cast<OutT*>(y), ldy, vec);
}

}  // namespace

void lora_shrink(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, int32_t max_rank,
                 const void* x, const float* norm_w, int64_t ldx, int64_t in, DType dt, const LoraScratch& t,
                 bool pdl, cudaStream_t s, cudaEvent_t done) {
  if (rows.max_tiles == 0 || max_rank == 0) {
    if (done != nullptr) check_cuda(cudaEventRecord(done, s), "cudaEventRecord");
    return;
  }
  if (rows.max_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_shrink: more than 65535 tiles");
  if (in % kChunk != 0 || ldx % kChunk != 0 || max_rank % kLoraRankAlign != 0 || t.ldt < max_rank + 1)
    throw EngineError(ErrorCode::internal, "lora_shrink: in " + std::to_string(in) + ", ldx " + std::to_string(ldx) +
                                               " must be multiples of 8, max_rank " + std::to_string(max_rank) +
                                               " a multiple of " + std::to_string(kLoraRankAlign) + " below ldt " +
                                               std::to_string(t.ldt));
  if (norm_w != nullptr) {
    ENGINE_DISPATCH_DTYPE(dt, (launch_shrink<T, float>(rows, table, slot_stride, max_rank, x, norm_w, ldx, in, t, pdl,
                                                       done, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch_shrink<T, T>(rows, table, slot_stride, max_rank, x, nullptr, ldx, in, t, pdl,
                                                   done, s)));
  }
  check_launch("lora_shrink");
}

void lora_expand(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, const LoraScratch& t,
                 int64_t in, bool norm, float eps, int64_t n, void* y, bool y_f32, int64_t ldy, DType dt, bool pdl,
                 cudaStream_t s) {
  if (rows.max_tiles == 0 || n == 0) return;
  if (rows.max_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_expand: more than 65535 tiles");
  if (y_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (launch_expand<T, float>(rows, table, slot_stride, t, in, norm, eps, n, y, ldy, pdl, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch_expand<T, T>(rows, table, slot_stride, t, in, norm, eps, n, y, ldy, pdl, s)));
  }
  check_launch("lora_expand");
}

void lora_expand_delta(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride,
                       const LoraScratch& t, int64_t in, bool norm, float eps, int64_t n, float* delta, int64_t ldd,
                       DType dt, bool pdl, cudaStream_t s, cudaEvent_t done) {
  if (rows.max_tiles == 0 || n == 0) {
    if (done != nullptr) check_cuda(cudaEventRecord(done, s), "cudaEventRecord");
    return;
  }
  if (rows.max_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_expand_delta: more than 65535 tiles");
  ENGINE_DISPATCH_DTYPE(dt, (launch_expand<T, float, true>(rows, table, slot_stride, t, in, norm, eps, n, delta, ldd,
                                                           pdl, s, done)));
  check_launch("lora_expand_delta");
}

void lora_add(const LoraRowsDev& rows, const float* delta, int64_t ldd, int64_t n, void* y, bool y_f32, int64_t ldy,
              DType dt, bool pdl, cudaStream_t s) {
  if (rows.grid_tiles == 0 || n == 0) return;
  if (rows.grid_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_add: more than 65535 tiles");
  if (y_f32) {
    launch_add<float>(rows, delta, ldd, n, y, ldy, pdl, s);
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch_add<T>(rows, delta, ldd, n, y, ldy, pdl, s)));
  }
  check_launch("lora_add");
}

}  // namespace engine::cuda
