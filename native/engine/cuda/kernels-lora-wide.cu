// The grouped LoRA kernels on tensor cores, for steps of many rows over more adapters than the stacked cuBLAS
// products take (lora-kernels.h: lora_shrink_wide / lora_expand_wide; TRTLLM_LORA_STACK=0: every wide step). A
// prefill chunk's deltas are real products (4,096 rows x rank 16 x the projection's width), not the latency-bound
// handful of a decode step, and the decode kernels' fp32 FMAs made them cost about as much as the base products
// (H200, 8B shape, 4,096 prompt tokens over 8 adapters: shrink 33 ms + expand 29 ms against 69 ms).
// Both keep the decode kernels' tiles (up to kLoraTileRows = 8 rows of one slot), which are exactly the n = 8 of
// an mma.sync m16n8k16 — the 16 rows of the MMA are ranks (shrink) or output columns (expand):
//  - shrink: block (k slice of kLoraKSlice columns, tile), 8 warps over 256 columns each; per 16 columns a warp
//    multiplies 16 rank rows of A by its 8 rows of x (16-bit operands: x, or for a fused RMSNorm the fp32 residual
//    times the norm weight, rounded once) and the warps' sums meet in shared memory; the scratch layout is the
//    decode shrink's (slices of partial sums, each row's sum of squares in column ldt - 1), so the expand is
//    indifferent to which shrink ran;
//  - expand: block (512 output columns, tile); the tile's t rows (slices summed) staged in shared memory, then
//    per 16 columns of one segment one MMA per 16 ranks (B's rows are A operands as stored, t rounded to 16 bits
//    as the B operand); a 16-column group that a segment covers only in part takes the fp32 dot products instead.
// Accumulation in fp32 throughout; what differs from the decode kernels is t rounded to the model dtype before the
// expand and x (times the norm weight) before the shrink, as the base products round their inputs.
#include <string>
#include <type_traits>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/lora-kernels.h"
#include "cuda/lora-slices.cuh"
#include "cuda/mma.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kShrinkWarps = 8;
constexpr int kWarpK = static_cast<int>(kLoraKSlice) / kShrinkWarps;  // 256 input columns a warp
constexpr int kRankTiles = 4;  // 16-rank MMA rows a shrink pass keeps accumulators for
constexpr int kExpandWarps = 4;
constexpr int kGroupsPerWarp = 8;  // 16-column groups
constexpr int kExpandCols = kExpandWarps * kGroupsPerWarp * 16;  // 512
constexpr int kTsStride = kLoraMaxRank + 4;  // staged t rows, padded against bank conflicts (8-byte aligned)

__device__ __forceinline__ uint32_t ld32(const void* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }

template <typename T, typename XT>
__global__ void __launch_bounds__(kShrinkWarps * 32)
    lora_shrink_wide_kernel(LoraRowsDev r, const LoraTargetDesc* __restrict__ table, int64_t slot_stride,
                            const XT* __restrict__ x, int64_t ldx, int64_t in, const float* __restrict__ norm_w,
                            float* __restrict__ t, int64_t ldt, int64_t slice_stride) {
  constexpr bool kNorm = std::is_same_v<XT, float>;
  constexpr int M = kLoraTileRows;
  static_assert(M == 8, "a tile's rows are the MMA's n");
  __shared__ float part[kShrinkWarps][kRankTiles * 16][M];
  __shared__ float ssp[kShrinkWarps][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const LoraTile tile = r.tiles[blockIdx.y];
  pdl_enter();  // (a wide step's launches are long: nothing gained by reading ahead of the wait)
  if (tile.count <= 0) return;
  const LoraTargetDesc* d = table + tile.slot * slot_stride;
  const int32_t rank = d->rank;
  if (rank == 0) return;  // (the same for the whole block)
  const T* a = static_cast<const T*>(d->a);
  const int m = tile.count;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.x) * kLoraKSlice + static_cast<int64_t>(warp) * kWarpK;
  const int64_t k_end = k_begin + kWarpK < in ? k_begin + kWarpK : in;
  const bool row_ok = g < m;  // this lane's x row: the MMA's column g
  const XT* xrow = x + static_cast<int64_t>(r.rows[tile.begin + (row_ok ? g : 0)]) * ldx;
  const int rank_tiles = (rank + 15) / 16;
  float* ts = t + static_cast<int64_t>(blockIdx.x) * slice_stride;
  float ss = 0;
  for (int rt0 = 0; rt0 < rank_tiles; rt0 += kRankTiles) {
    float acc[kRankTiles][4];
#pragma unroll
    for (int j = 0; j < kRankTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
#pragma unroll 4  // (several columns' loads of A and x in flight before their MMAs)
    for (int64_t k = k_begin; k < k_end; k += 16) {
      const bool hi = k + 8 < in;  // in % 8 == 0: the upper 8 columns exist or none of them do
      uint32_t b0 = 0, b1 = 0;
      if (row_ok) {
        if constexpr (kNorm) {
          const float2 x0 = *reinterpret_cast<const float2*>(xrow + k + 2 * q);
          const float2 g0 = __ldg(reinterpret_cast<const float2*>(norm_w + k + 2 * q));
          float2 x1 = make_float2(0, 0), g1 = make_float2(0, 0);
          if (hi) {
            x1 = *reinterpret_cast<const float2*>(xrow + k + 8 + 2 * q);
            g1 = __ldg(reinterpret_cast<const float2*>(norm_w + k + 8 + 2 * q));
          }
          if (rt0 == 0) ss += x0.x * x0.x + x0.y * x0.y + x1.x * x1.x + x1.y * x1.y;
          b0 = Mma<T>::pack(x0.x * g0.x, x0.y * g0.y);
          b1 = Mma<T>::pack(x1.x * g1.x, x1.y * g1.y);
        } else {
          b0 = *reinterpret_cast<const uint32_t*>(xrow + k + 2 * q);
          b1 = hi ? *reinterpret_cast<const uint32_t*>(xrow + k + 8 + 2 * q) : 0u;
        }
      }
#pragma unroll
      for (int j = 0; j < kRankTiles; ++j) {
        const int rt = rt0 + j;
        if (rt >= rank_tiles) break;
        // Rank rows rt * 16 + g (always < rank: ranks are multiples of 8) and + 8 (zeros past the rank).
        const int r_lo = rt * 16 + g;
        const bool r_hi = r_lo + 8 < rank;
        const T* a_lo = a + static_cast<int64_t>(r_lo) * in + k + 2 * q;
        const T* a_hi = a_lo + 8 * in;
        uint32_t af[4];
        af[0] = ld32(a_lo);
        af[1] = r_hi ? ld32(a_hi) : 0u;
        af[2] = hi ? ld32(a_lo + 8) : 0u;
        af[3] = r_hi && hi ? ld32(a_hi + 8) : 0u;
        Mma<T>::run(acc[j], af, b0, b1);
      }
    }
    // acc[j]: (rank rt * 16 + g, row 2q), (.., row 2q + 1), (rank + 8, row 2q), (rank + 8, row 2q + 1).
#pragma unroll
    for (int j = 0; j < kRankTiles; ++j) {
      part[warp][j * 16 + g][2 * q] = acc[j][0];
      part[warp][j * 16 + g][2 * q + 1] = acc[j][1];
      part[warp][j * 16 + g + 8][2 * q] = acc[j][2];
      part[warp][j * 16 + g + 8][2 * q + 1] = acc[j][3];
    }
    __syncthreads();
    const int ranks = rank - rt0 * 16 < kRankTiles * 16 ? rank - rt0 * 16 : kRankTiles * 16;
    for (int o = threadIdx.x; o < ranks * M; o += blockDim.x) {
      const int rr = o / M, i = o - rr * M;
      if (i >= m) continue;
      float v = 0;
#pragma unroll
      for (int w = 0; w < kShrinkWarps; ++w) v += part[w][rr][i];
      ts[static_cast<int64_t>(tile.begin + i) * ldt + rt0 * 16 + rr] = v;
    }
    __syncthreads();  // part is rewritten by the next pass
  }
  if constexpr (kNorm) {
    // The rows' sums of squares over this slice (each lane held row g's share of its columns).
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    if (q == 0) ssp[warp][g] = ss;
    __syncthreads();
    if (threadIdx.x < m) {
      float v = 0;
#pragma unroll
      for (int w = 0; w < kShrinkWarps; ++w) v += ssp[w][threadIdx.x];
      ts[static_cast<int64_t>(tile.begin + threadIdx.x) * ldt + ldt - 1] = v;
    }
  }
}

template <typename T, typename OutT>
__global__ void __launch_bounds__(kExpandWarps * 32)
    lora_expand_wide_kernel(LoraRowsDev r, const LoraTargetDesc* __restrict__ table, int64_t slot_stride,
                            const float* __restrict__ t, int64_t ldt, int64_t slice_stride, int32_t slices,
                            bool norm, int64_t in, float eps, int64_t n, OutT* y, int64_t ldy) {
  constexpr int M = kLoraTileRows;
  __shared__ __align__(16) float ts[M][kTsStride];
  __shared__ float inv[M];
  __shared__ __align__(16) uint32_t desc_words[sizeof(LoraTargetDesc) / 4];
  const LoraTargetDesc* d = reinterpret_cast<const LoraTargetDesc*>(desc_words);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const LoraTile tile = r.tiles[blockIdx.y];
  if (tile.count > 0) {
    static_assert(sizeof(LoraTargetDesc) % 4 == 0, "copied as words");
    const uint32_t* src = reinterpret_cast<const uint32_t*>(table + tile.slot * slot_stride);
    for (int w = threadIdx.x; w < static_cast<int>(sizeof(LoraTargetDesc) / 4); w += blockDim.x)
      desc_words[w] = __ldg(src + w);
  }
  __syncthreads();
  pdl_enter();
  if (tile.count <= 0 || d->rank == 0) return;  // (the same for the whole block)
  const int m = tile.count;
  const int32_t rank = d->rank;
  if (threadIdx.x < M) {
    const int i = threadIdx.x;
    float s = 1.0f;
    if (norm && i < m) {
      const float s2 = sum_slices(t + static_cast<int64_t>(tile.begin + i) * ldt + ldt - 1, slices, slice_stride);
      s = 1.0f / sqrtf(s2 / static_cast<float>(in) + eps);  // the norm kernel's 1 / rms
    }
    inv[i] = s;
  }
  for (int o = threadIdx.x; o < m * rank; o += blockDim.x) {
    const int i = o / rank, c = o - i * rank;
    ts[i][c] = sum_slices(t + static_cast<int64_t>(tile.begin + i) * ldt + c, slices, slice_stride);
  }
  // Rows past the tile's count: zeros (they only reach the MMA's columns of those rows, never written, but keep
  // them finite).
  for (int o = threadIdx.x; o < (M - m) * rank; o += blockDim.x) {
    const int i = m + o / rank, c = o % rank;
    ts[i][c] = 0.0f;
  }
  __syncthreads();
  // This lane's output rows: 2q and 2q + 1 of the tile.
  const int row0 = 2 * q, row1 = 2 * q + 1;
  OutT* y0 = row0 < m ? y + static_cast<int64_t>(r.rows[tile.begin + row0]) * ldy : nullptr;
  OutT* y1 = row1 < m ? y + static_cast<int64_t>(r.rows[tile.begin + row1]) * ldy : nullptr;
  const float s0 = row0 < m ? inv[row0] : 0.0f, s1 = row1 < m ? inv[row1] : 0.0f;
  const int64_t cw = static_cast<int64_t>(blockIdx.x) * kExpandCols + static_cast<int64_t>(warp) * kGroupsPerWarp * 16;
  for (int gi = 0; gi < kGroupsPerWarp; ++gi) {
    const int64_t cb = cw + gi * 16;
    if (cb >= n) break;
    float acc[4] = {0, 0, 0, 0};
    bool touched = false;
    for (int si = 0; si < d->n_seg; ++si) {
      const LoraSegDesc& sg = d->seg[si];
      const int64_t lo = cb > sg.out_offset ? cb : sg.out_offset;
      const int64_t end = sg.out_offset + sg.out;
      const int64_t hi = cb + 16 < end ? cb + 16 : end;
      if (lo >= hi) continue;
      touched = true;
      const T* b = static_cast<const T*>(sg.b);
      if (lo == cb && hi == cb + 16) {
        // The A operand is B's rows (output columns cb + g, cb + g + 8) as stored: [out, rank], rank padded to 8.
        const T* b_lo = b + (cb - sg.out_offset + g) * sg.rank + 2 * q;
        const T* b_hi = b_lo + 8 * static_cast<int64_t>(sg.rank);
        const float* tr = &ts[g][sg.t_offset + 2 * q];
        for (int kr = 0; kr < sg.rank; kr += 16) {
          const bool hi_ok = kr + 8 < sg.rank;
          uint32_t af[4];
          af[0] = ld32(b_lo + kr);
          af[1] = ld32(b_hi + kr);
          af[2] = hi_ok ? ld32(b_lo + kr + 8) : 0u;
          af[3] = hi_ok ? ld32(b_hi + kr + 8) : 0u;
          const float2 t0 = *reinterpret_cast<const float2*>(tr + kr);
          const float2 t1 = hi_ok ? *reinterpret_cast<const float2*>(tr + kr + 8) : make_float2(0, 0);
          Mma<T>::run(acc, af, Mma<T>::pack(t0.x, t0.y), Mma<T>::pack(t1.x, t1.y));
        }
      } else {
        // A segment edge inside the group: this lane's four outputs as fp32 dot products where it covers them.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t col = cb + g + 8 * h;
          if (col < lo || col >= hi) continue;
          const T* brow = b + (col - sg.out_offset) * sg.rank;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int row = 2 * q + e;
            if (row >= m) continue;
            float v = 0;
            for (int kr = 0; kr < sg.rank; ++kr) v += to_float(brow[kr]) * ts[row][sg.t_offset + kr];
            acc[2 * h + e] += v;
          }
        }
      }
    }
    if (!touched) continue;
    // acc: (column cb + g, row 2q), (cb + g, 2q + 1), (cb + g + 8, 2q), (cb + g + 8, 2q + 1).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = cb + g + 8 * h;
      if (col >= n) continue;
      if (y0 != nullptr) y0[col] = from_float<OutT>(to_float(y0[col]) + acc[2 * h] * s0);
      if (y1 != nullptr) y1[col] = from_float<OutT>(to_float(y1[col]) + acc[2 * h + 1] * s1);
    }
  }
}

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

template <typename T, typename OutT>
void launch_expand_wide(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride,
                        const LoraScratch& t, int64_t in, bool norm, float eps, int64_t n, void* y, int64_t ldy,
                        bool pdl, dim3 grid, cudaStream_t s) {
  const dim3 block(kExpandWarps * 32);
  OutT* out = static_cast<OutT*>(y);
  if (pdl)
    launch_pdl(lora_expand_wide_kernel<T, OutT>, grid, block, s, rows, table, slot_stride, t.t, t.ldt, t.slice_stride,
               lora_k_slices(in), norm, in, eps, n, out, ldy);
  else
    lora_expand_wide_kernel<T, OutT><<<grid, block, 0, s>>>(rows, table, slot_stride, t.t, t.ldt, t.slice_stride,
                                                            lora_k_slices(in), norm, in, eps, n, out, ldy);
}

}  // namespace

void lora_shrink_wide(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, int32_t max_rank,
                      const void* x, const float* norm_w, int64_t ldx, int64_t in, DType dt, const LoraScratch& t,
                      cudaStream_t s) {
  if (rows.max_tiles == 0 || max_rank == 0) return;
  if (rows.max_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_shrink_wide: more than 65535 tiles");
  if (in % 8 != 0 || ldx % 8 != 0 || max_rank % kLoraRankAlign != 0 || t.ldt < max_rank + 1)
    throw EngineError(ErrorCode::internal, "lora_shrink_wide: in " + std::to_string(in) + ", ldx " +
                                               std::to_string(ldx) + " must be multiples of 8, max_rank " +
                                               std::to_string(max_rank) + " a multiple of " +
                                               std::to_string(kLoraRankAlign) + " below ldt " + std::to_string(t.ldt));
  const dim3 grid(static_cast<unsigned>(lora_k_slices(in)), static_cast<unsigned>(rows.max_tiles));
  const dim3 block(kShrinkWarps * 32);
  if (norm_w != nullptr) {
    ENGINE_DISPATCH_DTYPE(dt, (lora_shrink_wide_kernel<T, float><<<grid, block, 0, s>>>(
                                  rows, table, slot_stride, static_cast<const float*>(x), ldx, in, norm_w, t.t, t.ldt,
                                  t.slice_stride)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (lora_shrink_wide_kernel<T, T><<<grid, block, 0, s>>>(
                                  rows, table, slot_stride, static_cast<const T*>(x), ldx, in, nullptr, t.t, t.ldt,
                                  t.slice_stride)));
  }
  check_launch("lora_shrink_wide");
}

void lora_expand_wide(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride,
                      const LoraScratch& t, int64_t in, bool norm, float eps, int64_t n, void* y, bool y_f32,
                      int64_t ldy, DType dt, bool pdl, cudaStream_t s) {
  if (rows.max_tiles == 0 || n == 0) return;
  if (rows.max_tiles > 65535) throw EngineError(ErrorCode::internal, "lora_expand_wide: more than 65535 tiles");
  const dim3 grid(blocks(n, kExpandCols), static_cast<unsigned>(rows.max_tiles));
  if (y_f32) {
    ENGINE_DISPATCH_DTYPE(dt, (launch_expand_wide<T, float>(rows, table, slot_stride, t, in, norm, eps, n, y, ldy, pdl,
                                                            grid, s)));
  } else {
    ENGINE_DISPATCH_DTYPE(dt, (launch_expand_wide<T, T>(rows, table, slot_stride, t, in, norm, eps, n, y, ldy, pdl,
                                                        grid, s)));
  }
  check_launch("lora_expand_wide");
}

}  // namespace engine::cuda
