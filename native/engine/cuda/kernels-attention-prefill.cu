// Paged attention for prompt chunks on tensor cores, with the work split as FlashAttention-2 splits it: each warp
// of a block owns 16 tile rows (tokens x the query heads of one kv head) and walks every position of every staged
// key / value tile, so the block's rows are 4 x 16 and its online softmax state never needs combining.
// The general kernel (kernels-attention-mma.cu) serves every row shape with one 16-row group a block, its 4 warps
// each taking 16 positions of a tile and merging through shared memory at the end. For a prompt that spends a
// block's loads, FP8 widening and barriers on 16 rows: measured on an H200 (Llama-3-8B shape, fp8 weights and KV,
// a chunk of 32 prompts x 128 tokens), 7.9 ms of attention in a 59.5 ms chunk, ~17 TFLOPS. Here each tile serves
// 64 rows, and a warp skips the 16-position steps wholly past its rows' contexts (causal) or before their windows.
// Taken for launches with prompt rows (not new_last_only) whose row groups of 4 x attention_rows_per_group make
// enough blocks that no context is split (long single prompts keep the general kernel's partitions), head sizes
// 64 and 128; TRTLLM_ATTN_PREFILL_KERNEL=0 turns it off.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "cuda/attention-launch.h"
#include "cuda/attention-tiles.cuh"
#include "cuda/attention-warp.cuh"
#include "cuda/attention-window.cuh"
#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/kv-element.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kWarps = kAttentionPrefillWarps;
using Sh = Shape<kWarps>;  // tiles of 64 positions, loaded by the block's 128 threads
constexpr int kRows = 16;  // MMA tile rows a warp owns: tokens x heads

// Two stages of (K, V) tiles as loaded (F8: e4m3 bytes), and (F8) the widened 16-bit pair behind them.
template <int HD, bool F8>
constexpr size_t smem_bytes() {
  return size_t{2} * 2 * Sh::kTile * stage_stride<HD, F8>() * (F8 ? 1 : 2) +
         (F8 ? size_t{2} * Sh::kTile * row_stride<HD>() * 2 : 0);
}

// grid: (wide row groups, n_kv * (group / G)). Warp w serves tokens [w * 16 / G, (w + 1) * 16 / G) of the block's
// group (attention-rows.h: consecutive rows of one sequence), heads h0 .. h0 + G - 1.
template <typename T, int HD, int G, bool F8>
__global__ void __launch_bounds__(Sh::kThreads) attention_prefill_kernel(AttnArgs a) {
  static_assert(kRows % G == 0, "tile rows are tokens x heads");
  constexpr int kTile = Sh::kTile, KSTEPS = HD / 16, NT = HD / 8, RS = row_stride<HD>(), TPW = kRows / G;
  using S = KvStore<T, F8>;
  extern __shared__ __align__(16) unsigned char smem[];
  S* stage_mem = reinterpret_cast<S*>(smem);  // [2 stages][K, V][kTile * stage_stride]
  T* tiles = reinterpret_cast<T*>(smem + size_t{2} * 2 * kTile * stage_stride<HD, F8>() * sizeof(S));

  pdl_enter();  // (pdl.cuh) everything below reads this step's q and pools
  const AttnGroup grp = a.wide_groups[blockIdx.x];
  const int group = a.n_heads / a.n_kv, per_kv = group / G;
  const int kvh = blockIdx.y / per_kv;
  const int h0 = kvh * group + (blockIdx.y % per_kv) * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qr = lane >> 2, qc = lane & 3;  // this lane's fragment rows (qr, qr + 8) and column pair

  // The block's positions [glo, gctx) and this warp's [wlo, wend).
  const int wfirst = warp * TPW;
  const AttnGroup wg{grp.first + wfirst, max(0, min(TPW, grp.count - wfirst))};
  int gctx = 0, glo = INT_MAX, wend = 0, wlo = INT_MAX;
  for (int t = 0; t < grp.count; ++t) {
    const AttnRow row = a.rows[grp.first + t];
    const int lo = attn_row_lo(row, a.window);
    gctx = max(gctx, row.ctx);
    glo = min(glo, lo);
    if (t >= wfirst && t < wfirst + wg.count) {
      wend = max(wend, row.ctx);
      wlo = min(wlo, lo);
    }
  }
  const FragMask fm = frag_mask<G>(a, wg, qr, INT_MAX);
  const auto load_tile = tile_loader<T, HD, kWarps, false, F8>(a, stage_mem, a.rows[grp.first].table, kvh, gctx, tid);
  const int begin = glo, n_tiles = (gctx - glo + kTile - 1) / kTile;
  if (n_tiles > 0) load_tile(begin, 0, begin, begin + kTile);
  uint32_t qf[KSTEPS][4];
  load_q_fragments<T, HD, G>(a, wg, h0, qr, qc, false, false, nullptr, qf);

  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // running max (log2 units) and lane-partial sum per row
  const ScoreMap sm = score_map<F8>(a);
  for (int it = 0; it < n_tiles; ++it) {
    const int t0 = begin + it * kTile;
    if (it + 1 < n_tiles) {
      load_tile(t0 + kTile, (it + 1) & 1, t0 + kTile, t0 + 2 * kTile);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile `it` is in shared memory for every warp
    const T* ks;
    if constexpr (F8) {
      widen_tiles<T, HD, kWarps>(stage_mem, it & 1, tiles, tid);
      __syncthreads();
      ks = tiles;
    } else {
      ks = stage_mem + (it & 1) * 2 * kTile * RS;
    }
    const T* vs = ks + kTile * RS;
#pragma unroll
    for (int sub = 0; sub < kWarps; ++sub) {
      const int pw = 16 * sub;  // (warp-uniform) a step some row of this warp sees part of
      if (t0 + pw < wend && t0 + pw + 16 > wlo) attend_tile<T, HD>(ks, vs, t0, pw, lane, qc, fm, sm, qf, o, m, l);
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // The warp's rows: sums over the 4 lanes of a row, then outputs times the v scale over the sum, two dims a store.
  const float vmul = F8 ? a.kv.v_scale : 1.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int i = qr + 8 * h, t = i / G, g = i % G;
    if (t >= wg.count) continue;
    const float f = l[h] > 0 ? vmul / l[h] : 0.0f;  // (every prompt row sees its own position)
    T* dst = static_cast<T*>(a.out) + static_cast<int64_t>(wg.first + t) * a.out_stride +
             static_cast<int64_t>(h0 + g) * HD + 2 * qc;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint32_t packed = Mma<T>::pack(o[n][2 * h] * f, o[n][2 * h + 1] * f);
      *reinterpret_cast<uint32_t*>(dst + 8 * n) = packed;
    }
  }
}

template <typename T, int HD, int G>
void launch_f8(const AttnArgs& a, cudaStream_t s) {
  const int per_kv = (a.n_heads / a.n_kv) / G;
  const dim3 grid(static_cast<unsigned>(a.n_wide_groups), static_cast<unsigned>(a.n_kv * per_kv));
  const dim3 block(Sh::kThreads);
  if (a.kv.fp8)
    launch_pdl_opted<attention_prefill_kernel<T, HD, G, true>, smem_bytes<HD, true>()>(grid, block, s, a);
  else
    launch_pdl_opted<attention_prefill_kernel<T, HD, G, false>, smem_bytes<HD, false>()>(grid, block, s, a);
}

template <typename T, int HD>
void launch_g(const AttnArgs& a, cudaStream_t s) {
  switch (attention_mma_heads(a.n_heads / a.n_kv)) {
    case 16: launch_f8<T, HD, 16>(a, s); break;
    case 8: launch_f8<T, HD, 8>(a, s); break;
    case 4: launch_f8<T, HD, 4>(a, s); break;
    case 2: launch_f8<T, HD, 2>(a, s); break;
    default: launch_f8<T, HD, 1>(a, s); break;
  }
}

}  // namespace

bool attention_prefill_applies(const AttnArgs& a, int num_sms) {
  static const bool on = [] {
    const char* v = std::getenv("TRTLLM_ATTN_PREFILL_KERNEL");
    return v == nullptr || std::string(v) != "0";
  }();
  if (!on || a.new_last_only || a.wide_groups == nullptr || a.n_wide_groups < 1) return false;
  if (a.head_dim != 64 && a.head_dim != 128) return false;
  const int group = a.n_heads / a.n_kv;
  const int64_t blocks = static_cast<int64_t>(a.n_wide_groups) * a.n_kv * (group / attention_mma_heads(group));
  return blocks >= 2 * static_cast<int64_t>(num_sms);
}

void attention_prefill(const AttnArgs& a, cudaStream_t s) {
  ENGINE_DISPATCH_DTYPE(a.dt, {
    if (a.head_dim == 64)
      launch_g<T, 64>(a, s);
    else
      launch_g<T, 128>(a, s);
  });
  check_launch("attention (prompt rows)");
}

}  // namespace engine::cuda
