// What the tensor-core attention kernels share (kernels-attention-mma.cu for every row shape,
// kernels-attention-decode.cu for large decode batches): the staged K / V tiles in shared memory, their loader,
// ldmatrix, and how dot products become scores.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/cp-async.cuh"
#include "cuda/kernels.h"
#include "cuda/kv-element.cuh"

namespace engine::cuda {

// W warps per block, each taking 16 positions of a tile: W = 4 (tiles of 64) in general, W = 8 (tiles of 128,
// `wide`) for small decode batches with contexts of up to two such tiles, left unsplit (plan_split in
// kernels-attention.cu).
template <int W>
struct Shape {
  static constexpr int kWarps = W, kThreads = 32 * W, kTile = 16 * W;
};
constexpr float kLog2e = 1.4426950408889634f;

// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <int HD>
__host__ __device__ constexpr int row_stride() {
  return HD + 8;  // elements: the 8 rows of an ldmatrix land on distinct banks
}
// Row stride (elements) of the staged tiles: the 16-bit tiles themselves, or (F8) the e4m3 bytes as loaded, 16
// bytes of padding a row.
template <int HD, bool F8>
__host__ __device__ constexpr int stage_stride() {
  return F8 ? HD + 16 : row_stride<HD>();
}

// How raw dot products become scores in log2 units (the kernel's exp2 softmax): without a cap (cap 0), x * mul
// with mul = scale * log2(e); with Gemma 2's soft cap c, the cap applies to the true scaled score, so
// c * log2(e) * tanh(x * scale / c): mul = scale / c and cap = c * log2(e).
struct ScoreMap {
  float mul, cap;
};

// The launch's ScoreMap: its scale (times an FP8 pool's k scale: the keys are read as their stored values) and
// its soft cap.
template <bool F8>
__device__ __forceinline__ ScoreMap score_map(const AttnArgs& a) {
  const float scale = F8 ? a.scale * a.kv.k_scale : a.scale;
  return a.softcap > 0 ? ScoreMap{scale / a.softcap, a.softcap * kLog2e} : ScoreMap{scale * kLog2e, 0.0f};
}

// Loads positions [from, to) of the tile at t0 into stage `stage` of the shared K / V tiles as the pool stores
// them (zeros past the context: their values must not be NaN garbage, weight 0 x NaN), as one cp.async group.
// Positions come from the block table of the group's sequence; `skip` (EARLY) is one position not to load.
template <typename T, int HD, int W, bool EARLY, bool F8>
struct TileLoader {
  using S = KvStore<T, F8>;
  S* stage_mem;  // [2 stages][K, V][kTile * stage_stride]
  const S* k_pool;
  const S* v_pool;
  const int32_t* table;
  int tpb;
  int64_t block_stride;
  int kvh, end, tid;

  __device__ __forceinline__ void operator()(int t0, int stage, int from, int to, int skip = -1) const {
    constexpr int kThreads = Shape<W>::kThreads, kTile = Shape<W>::kTile;
    constexpr int EPV = 16 / static_cast<int>(sizeof(S));  // elements per 16-byte copy
    constexpr int RS = stage_stride<HD, F8>(), VPR = HD / EPV;
    constexpr int LOADS = (kTile * VPR + kThreads - 1) / kThreads;
    S* ks = stage_mem + stage * 2 * kTile * RS;
    S* vs = ks + kTile * RS;
#pragma unroll(EARLY ? 4 : LOADS)  // (fully unrolled, the EARLY kernels of head size 128 spill registers)
    for (int j = 0; j < LOADS; ++j) {
      const int v = tid + j * kThreads, p = v / VPR, c = v % VPR, pos = t0 + p;
      if (kTile * VPR % kThreads != 0 && v >= kTile * VPR) break;  // (F8 with head size 16: half the threads)
      if constexpr (EARLY) {  // (the whole tile otherwise)
        if (pos < from || pos >= to || pos == skip) continue;
      }
      const bool ok = pos < end;
      int64_t off = 0;
      if (ok) off = static_cast<int64_t>(__ldg(table + pos / tpb)) * block_stride +
                    (static_cast<int64_t>(kvh) * tpb + pos % tpb) * HD + c * EPV;
      copy16_async(&ks[p * RS + c * EPV], k_pool + off, ok);
      copy16_async(&vs[p * RS + c * EPV], v_pool + off, ok);
    }
    cp_async_commit();
  }
};

// The loader of a block serving kv head kvh for rows whose block table starts at entry `table`, positions below
// `end`, its thread `tid`.
template <typename T, int HD, int W, bool EARLY, bool F8>
__device__ __forceinline__ TileLoader<T, HD, W, EARLY, F8> tile_loader(const AttnArgs& a, KvStore<T, F8>* stage_mem,
                                                                       int32_t table, int kvh, int end, int tid) {
  using S = KvStore<T, F8>;
  const int tpb = a.tokens_per_block;
  return {stage_mem, static_cast<const S*>(a.k_pool), static_cast<const S*>(a.v_pool), a.block_tables + table, tpb,
          static_cast<int64_t>(a.n_kv) * tpb * HD, kvh, end, tid};
}

}  // namespace engine::cuda
