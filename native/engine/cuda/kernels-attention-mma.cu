// Tensor-core paged attention (mma.sync m16n8k16: bf16 / fp16 in, fp32 accumulate) for head sizes up to 128, for
// decode rows and prefill chunks alike. One thread block serves one group of rows (up to 16 / G consecutive tokens
// of one sequence, attention-rows.h), one kv head and G of the query heads that read it: the 16 rows of the MMA tile
// are those tokens x G heads, all reading the same keys and values, so each tile of keys / values is loaded into
// shared memory once for all of them (a decode row fills G of the 16 rows, a prefill chunk all 16). Tiles of 64
// positions are double-buffered with cp.async so the next tile's loads are in flight during this tile's math (the
// first two tiles' older positions of a decode launch even before the programmatic-launch wait); each
// of the 4 warps takes 16 positions of a tile with its own online softmax (log2 domain) and output accumulator, and
// the warps' results are combined through shared memory at the end, or written as one partition of a split context
// for the merge kernel (kernels-attention.cu). (Merging in the last partition block to finish, counted with atomics,
// was tried: slower, 4.83 against 4.57 ms per batch-1 step of the 8B shape with the separate merge kernel and PDL.)
// Small decode batches also do rope_and_write_kv's work for their row (AttnArgs::fresh): measured on an H200 against
// the separate kernel in the same build, batch-1 steps of the 8B shape 4.33-4.36 against 4.45-4.47 ms, batch 8 equal.
// FP8 pools (--kv-cache-dtype fp8) stage their e4m3 bytes the same way and widen each tile into 16-bit tiles in
// shared memory before the warps read it (kv-element.cuh: exact, the scales folded into scores and outputs).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <string>

#include "cuda/attention-launch.h"
#include "cuda/attention-tiles.cuh"
#include "cuda/attention-warp.cuh"
#include "cuda/attention-window.cuh"
#include "cuda/cp-async.cuh"
#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/kv-element.cuh"
#include "cuda/mma.cuh"
#include "cuda/pdl.cuh"
#include "cuda/rope.cuh"

namespace engine::cuda {
namespace {

constexpr int kRows = 16;   // MMA tile rows: tokens x heads
constexpr float kLn2 = 0.6931471805599453f;

// Shared memory: two stages of (K, V) tiles as loaded (2-byte elements, or F8 bytes, which then convert into one
// 16-bit (K, V) tile pair behind the stages), or the warps' combine area, whichever is larger.
template <int HD, int W, bool F8>
constexpr size_t smem_bytes() {
  constexpr int kWarps = Shape<W>::kWarps, kTile = Shape<W>::kTile;
  const size_t stages = size_t{2} * 2 * kTile * stage_stride<HD, F8>() * (F8 ? 1 : 2) +
                        (F8 ? size_t{2} * kTile * row_stride<HD>() * 2 : 0);
  const size_t combine = (size_t{kWarps} * kRows * HD + kWarps * kRows * 2) * sizeof(float);
  return stages > combine ? stages : combine;
}

// The row's new key pairs (jobs [0, HD / 2)) and value elements ([HD / 2, HD / 2 + HD)) of AttnArgs::fresh, raw
// and biased (with the row's LoRA deltas), for this thread's jobs: a key's two rotate_half partners in nx / ny, a
// value in nx. Issued before q's loads so both are in flight together.
template <int HD, int N, int THREADS>
__device__ __forceinline__ void load_new_kv(const AttnArgs& a, const AttnRow& row0, int kvh, int tid, float (&nx)[N],
                                            float (&ny)[N]) {
  constexpr int half = HD / 2, kJobs = half + HD;
  const int64_t q_dim = static_cast<int64_t>(a.n_heads) * HD, kv_dim = static_cast<int64_t>(a.n_kv) * HD;
  const int64_t k_at = q_dim + static_cast<int64_t>(kvh) * HD, v_at = k_at + kv_dim;  // within a qkv row
  const float* src = a.q + static_cast<int64_t>(row0.q_row) * a.q_stride;
  const float* bias = a.fresh.bias;
  const RowDelta& d = a.fresh.delta;  // the row's LoRA deltas, where it has them
  const int32_t g = d.delta != nullptr ? d.at[row0.q_row] : -1;
  const float* drow = g >= 0 ? d.delta + static_cast<int64_t>(g) * d.ld : nullptr;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int e = tid + j * THREADS;
    nx[j] = ny[j] = 0;
    if (e < half) {
      nx[j] = src[k_at + e] + (bias != nullptr ? bias[k_at + e] : 0.0f) + (drow != nullptr ? drow[k_at + e] : 0.0f);
      ny[j] = src[k_at + e + half] + (bias != nullptr ? bias[k_at + e + half] : 0.0f) +
              (drow != nullptr ? drow[k_at + e + half] : 0.0f);
    } else if (e < kJobs) {
      nx[j] = src[v_at + e - half] + (bias != nullptr ? bias[v_at + e - half] : 0.0f) +
              (drow != nullptr ? drow[v_at + e - half] : 0.0f);
    }
  }
}

// The row's new key (rotated when `rotate`) and value, from load_new_kv, as the pool stores them (kv-element.cuh)
// into the staged tile that holds position newp (0 or 1, loaded before the loop) and, from the first block of the
// kv head (to_pool), into the pools. (The loop's barrier comes before any warp reads the tile.)
template <typename T, bool F8, int HD, int N, int THREADS, int TILE, typename S = KvStore<T, F8>>
__device__ __forceinline__ void store_new_kv(const AttnArgs& a, S* stage_mem, int start, int newp, int64_t dst,
                                             bool to_pool, int tid, bool rotate, const float2* rope_cs,
                                             const float (&nx)[N], const float (&ny)[N]) {
  constexpr int RS = stage_stride<HD, F8>(), half = HD / 2, kJobs = half + HD;
  const int it = (newp - start) / TILE, p = (newp - start) % TILE;
  S* ks = stage_mem + (it & 1) * 2 * TILE * RS + p * RS;
  S* vs = ks + TILE * RS;
  const float k_inv = F8 ? 1.0f / a.kv.k_scale : 1.0f, v_inv = F8 ? 1.0f / a.kv.v_scale : 1.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int e = tid + j * THREADS;
    if (e < half) {
      float x = nx[j], y = ny[j];
      if (rotate) {
        x = rope_pair(nx[j], ny[j], rope_cs[e], true);
        y = rope_pair(ny[j], nx[j], rope_cs[e], false);
      }
      ks[e] = kv_encode<T, F8>(x, k_inv);
      ks[e + half] = kv_encode<T, F8>(y, k_inv);
      if (to_pool) {
        static_cast<S*>(a.k_pool)[dst + e] = ks[e];
        static_cast<S*>(a.k_pool)[dst + e + half] = ks[e + half];
      }
    } else if (e < kJobs) {
      vs[e - half] = kv_encode<T, F8>(nx[j], v_inv);
      if (to_pool) static_cast<S*>(a.v_pool)[dst + e - half] = vs[e - half];
    }
  }
}

// Combines the warps: each writes its rows' (max, sum) and unnormalised outputs to shared memory (`smem`, free
// once the loop is done), then every thread merges some; the rows' outputs, or (split context) this partition's
// unnormalised outputs with their max and sum for the merge kernel, times vmul (an FP8 pool's v scale).
// `part0`: the partition blockIdx.z counts from (attention-window.cuh); a row's cell is its partition less the
// row's own first.
template <typename T, int HD, int G, int W>
__device__ __forceinline__ void combine_warps(const AttnArgs& a, const AttnGroup& grp, int h0, int part_size, int part0,
                                              float vmul, unsigned char* smem, int tid, int warp, int qr, int qc,
                                              const float (&o)[HD / 8][4], const float (&m)[2], float (&l)[2],
                                              float* ws_out, float* ws_ms) {
  constexpr int kWarps = Shape<W>::kWarps, kThreads = Shape<W>::kThreads, NT = HD / 8;
  float* red = reinterpret_cast<float*>(smem);  // [kWarps][kRows][HD]
  float* ml = red + kWarps * kRows * HD;        // [kWarps][kRows][2]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (qc == 0) {
      ml[(warp * kRows + qr + 8 * h) * 2] = m[h];
      ml[(warp * kRows + qr + 8 * h) * 2 + 1] = l[h];
    }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      red[(warp * kRows + qr + 8 * (e >> 1)) * HD + 8 * n + 2 * qc + (e & 1)] = o[n][e];
  __syncthreads();
  const bool split = gridDim.z > 1;
  for (int idx = tid; idx < kRows * HD; idx += kThreads) {
    const int i = idx / HD, d = idx % HD, t = i / G, g = i % G;
    if (t >= grp.count) continue;
    float mm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, ml[(w * kRows + i) * 2]);
    // Nothing of this row's window in the partition: its context ends before it, or (a row of a group whose
    // windows start at different positions) its window starts after it. The merge reads neither. (A token tree's
    // row never meets a partition inside its context that it sees nothing of: kernels-attention.cu's kMinPartSize.)
    if (mm == -INFINITY) continue;
    float acc = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(ml[(w * kRows + i) * 2] - mm);
      acc += red[(w * kRows + i) * HD + d] * f;
      total += ml[(w * kRows + i) * 2 + 1] * f;
    }
    acc *= vmul;
    const int row = grp.first + t, head = h0 + g;
    if (!split) {
      static_cast<T*>(a.out)[static_cast<int64_t>(row) * a.out_stride + static_cast<int64_t>(head) * HD + d] =
          from_float<T>(acc / total);
    } else {
      const int part = part0 + static_cast<int>(blockIdx.z) - attn_row_lo(a.rows[row], a.window) / part_size;
      const int64_t cell = (static_cast<int64_t>(row) * a.n_heads + head) * gridDim.z + part;
      ws_out[cell * HD + d] = acc;
      if (d == 0) {
        ws_ms[cell * 2] = mm * kLn2;  // natural-log units, as the SIMT kernel's partitions
        ws_ms[cell * 2 + 1] = total;
      }
    }
  }
}

// Every tile of the partition [start, end) through attend_tile, double-buffered: each tile is loaded one
// iteration ahead (EARLY: tiles 0 and 1 are on their way already), so the newest cp.async group is always the next
// tile's (or part of it) and waiting for all but one completes this one.
// F8: each tile widens from its stage into `tiles` (widen_tiles) between two barriers before the warps read it.
template <typename T, int HD, int W, bool EARLY, bool F8>
__device__ __forceinline__ void attend_tiles(const TileLoader<T, HD, W, EARLY, F8>& load_tile, T* tiles, int start,
                                             int end, int n_tiles, int tid, int warp, int lane, int qc,
                                             const FragMask& fm, ScoreMap sm, const uint32_t (&qf)[HD / 16][4],
                                             float (&o)[HD / 8][4], float (&m)[2], float (&l)[2]) {
  constexpr int kTile = Shape<W>::kTile, RS = row_stride<HD>();
  const int pw = 16 * warp;  // this warp's positions within a tile
  for (int it = 0; it < n_tiles; ++it) {
    const int t0 = start + it * kTile;
    if (it + 1 < n_tiles) {
      if (!EARLY || it >= 1) load_tile(t0 + kTile, (it + 1) & 1, t0 + kTile, t0 + 2 * kTile);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile `it` is in shared memory for every warp
    const T* ks;
    if constexpr (F8) {
      widen_tiles<T, HD, W>(load_tile.stage_mem, it & 1, tiles, tid);
      __syncthreads();
      ks = tiles;
    } else {
      ks = load_tile.stage_mem + (it & 1) * 2 * kTile * RS;
    }
    const T* vs = ks + kTile * RS;
    // (warp-uniform) some of this warp's 16 positions are in the context
    if (t0 + pw < end) attend_tile<T, HD>(ks, vs, t0, pw, lane, qc, fm, sm, qf, o, m, l);
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
}

// grid: (n_groups, n_kv * (group / G), partitions).
// EARLY (decode launches of small batches, a.new_last_only): the first two tiles' older positions are requested
// before the programmatic-launch wait. (Built separately: the same code with EARLY a runtime choice made the
// batch-256 decode step 5 % slower.)
// F8: the pools hold e4m3 bytes (a.kv): staged as bytes, widened per tile, the k scale in the score multiplier and
// the v scale in the output.
template <typename T, int HD, int G, int W, bool EARLY, bool F8>
__global__ void __launch_bounds__(Shape<W>::kThreads, W == 4 ? 3 : 1)
    attention_mma_kernel(AttnArgs a, int part_size, float* ws_out, float* ws_ms) {
  static_assert(kRows % G == 0, "tile rows are tokens x heads");
  constexpr int kThreads = Shape<W>::kThreads, kTile = Shape<W>::kTile;
  constexpr int VPR = HD / 8;                       // 16-byte vectors per key / value row
  constexpr int KSTEPS = HD / 16;
  constexpr int NT = HD / 8;                        // output n-tiles of 8 dims
  static_assert(kTile * VPR / kThreads * kThreads == kTile * VPR, "tile loads must divide evenly");
  using S = KvStore<T, F8>;
  extern __shared__ __align__(16) unsigned char smem[];
  S* stage_mem = reinterpret_cast<S*>(smem);  // [2 stages][K, V][kTile * stage_stride]
  // F8: the widened (K, V) tiles, behind the stages.
  T* tiles = reinterpret_cast<T*>(smem + size_t{2} * 2 * kTile * stage_stride<HD, F8>() * sizeof(S));

  // EARLY: everything up to the wait reads only what was in memory before this step's first kernel: the row
  // metadata, and the keys / values of positions before each row's last, written by earlier steps. Their loads
  // are then in flight while the kernel before this one finishes.
  if constexpr (!EARLY) pdl_enter();  // pdl.cuh
  const AttnGroup grp = a.groups[blockIdx.x];
  const int group = a.n_heads / a.n_kv, per_kv = group / G;
  const int kvh = blockIdx.y / per_kv;
  const int h0 = kvh * group + (blockIdx.y % per_kv) * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qr = lane >> 2, qc = lane & 3;  // this lane's fragment rows (qr, qr + 8) and column pair

  int gctx = 0, glo = INT_MAX, oldest_new = INT_MAX;
  for (int t = 0; t < grp.count; ++t) {
    const AttnRow row = a.rows[grp.first + t];
    gctx = max(gctx, row.ctx);
    glo = min(glo, attn_row_lo(row, a.window));
    oldest_new = min(oldest_new, row.ctx - 1);
  }
  // Partitions count from the one holding the group's first visible position (attention-window.cuh); tiles start
  // at `begin`, so no position below every row's window is read, not even its block-table entry.
  const int part0 = glo / part_size;
  const int start = (part0 + static_cast<int>(blockIdx.z)) * part_size;
  if (start >= gctx) {  // the whole group's contexts end before this partition (the merge skips it)
    if constexpr (EARLY) pdl_enter();
    return;
  }
  const int begin = max(start, glo), end = min(gctx, start + part_size);
  // Positions [begin, fresh) of the first two tiles load before the wait.
  const int fresh = max(begin, min(oldest_new, end));
  // Tile row i is token i / G of the group, head h0 + i % G: what it sees (FragMask).
  const FragMask fm = frag_mask<G>(a, grp, qr, end);
  const int tpb = a.tokens_per_block;
  const auto load_tile = tile_loader<T, HD, W, EARLY, F8>(a, stage_mem, a.rows[grp.first].table, kvh, end, tid);
  const int n_tiles = (end - begin + kTile - 1) / kTile;
  const int t1 = begin + kTile;  // the second tile (if n_tiles > 1)
  // a.fresh (EARLY only; attention_mma_fuses_new_kv: one row per block, its partition within the first two
  // tiles): q, k, v of the row's last position are as the qkv projection left them. The block adds the bias and
  // rotates them itself: q on its way into the fragments, k and v into the shared tile (and, one block per kv head,
  // into the pools for later steps) instead of loading that position. Its (cos, sin) come before the wait (the
  // position is row metadata), and the raw values load together with q after it: the same one round trip to
  // memory the pool load of that position took, without a kernel of its own in front.
  const bool own_kv = EARLY && a.fresh.kv_dst != nullptr;
  const bool rotate = own_kv && a.fresh.inv_freq != nullptr;
  constexpr int half = HD / 2;
  __shared__ float2 rope_cs[EARLY ? half : 1];  // (cos, sin) per frequency at the row's position
  const AttnRow row0 = a.rows[grp.first];
  const int newp = row0.ctx - 1;
  if constexpr (EARLY) {
    load_tile(begin, 0, begin, min(fresh, t1));
    if (n_tiles > 1) load_tile(t1, 1, t1, min(fresh, t1 + kTile));
    if (rotate) {
      // longrope: the row's sequence picks the short or the long table (inv_freq holds both then).
      const bool long_table = a.fresh.use_long != nullptr && a.fresh.use_long[row0.q_row];
      const float* inv = a.fresh.inv_freq + (long_table ? half : 0);
      for (int i = tid; i < half; i += kThreads)
        rope_cs[i] = rope_cos_sin(a.fresh.positions[row0.q_row], inv[i]);  // rope.cuh
      __syncthreads();
    }
    pdl_enter();  // pdl.cuh
    const int skip = own_kv ? newp : -1;
    load_tile(begin, 0, min(fresh, t1), t1, skip);
    if (n_tiles > 1) load_tile(t1, 1, max(fresh, t1), t1 + kTile, skip);
  } else {
    load_tile(begin, 0, begin, t1);
  }
  constexpr int kJobs = half + HD, kNewPerThread = EARLY ? (kJobs + kThreads - 1) / kThreads : 1;
  const bool new_here = own_kv && newp < end;  // (newp >= begin: the block would have returned)
  float nx[kNewPerThread], ny[kNewPerThread];
  if (new_here) load_new_kv<HD, kNewPerThread, kThreads>(a, row0, kvh, tid, nx, ny);
  uint32_t qf[KSTEPS][4];
  load_q_fragments<T, HD, G>(a, grp, h0, qr, qc, own_kv, rotate, rope_cs, qf);
  if (new_here) {
    const int64_t dst = a.fresh.kv_dst[row0.q_row] + static_cast<int64_t>(kvh) * tpb * HD;
    store_new_kv<T, F8, HD, kNewPerThread, kThreads, kTile>(a, stage_mem, begin, newp, dst, blockIdx.y % per_kv == 0,
                                                            tid, rotate, rope_cs, nx, ny);
  }

  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // running max (log2 units) and lane-partial sum per row
  const ScoreMap sm = score_map<F8>(a);
  attend_tiles<T, HD, W, EARLY, F8>(load_tile, tiles, begin, end, n_tiles, tid, warp, lane, qc, fm, sm, qf, o, m, l);
  combine_warps<T, HD, G, W>(a, grp, h0, part_size, part0, F8 ? a.kv.v_scale : 1.0f, smem, tid, warp, qr, qc, o, m, l,
                             ws_out, ws_ms);
}

template <typename T, int HD, int G, int W, bool EARLY, bool F8>
void launch_kernel(const AttnArgs& a, int part_size, int parts, float* ws_out, float* ws_ms, cudaStream_t s) {
  const int per_kv = (a.n_heads / a.n_kv) / G;
  const dim3 grid(static_cast<unsigned>(a.n_groups), static_cast<unsigned>(a.n_kv * per_kv),
                  static_cast<unsigned>(parts));
  launch_pdl_opted<attention_mma_kernel<T, HD, G, W, EARLY, F8>, smem_bytes<HD, W, F8>()>(
      grid, dim3(Shape<W>::kThreads), s, a, part_size, ws_out, ws_ms);
}

template <typename T, int HD, int G, int W, bool EARLY>
void launch(const AttnArgs& a, int part_size, int parts, float* ws_out, float* ws_ms, cudaStream_t s) {
  if (a.kv.fp8)
    launch_kernel<T, HD, G, W, EARLY, true>(a, part_size, parts, ws_out, ws_ms, s);
  else
    launch_kernel<T, HD, G, W, EARLY, false>(a, part_size, parts, ws_out, ws_ms, s);
}

template <typename T, int HD, int W, bool EARLY>
void launch_g(const AttnArgs& a, int part_size, int parts, float* ws_out, float* ws_ms, cudaStream_t s) {
  switch (attention_mma_heads(a.n_heads / a.n_kv)) {
    case 16: launch<T, HD, 16, W, EARLY>(a, part_size, parts, ws_out, ws_ms, s); break;
    case 8: launch<T, HD, 8, W, EARLY>(a, part_size, parts, ws_out, ws_ms, s); break;
    case 4: launch<T, HD, 4, W, EARLY>(a, part_size, parts, ws_out, ws_ms, s); break;
    case 2: launch<T, HD, 2, W, EARLY>(a, part_size, parts, ws_out, ws_ms, s); break;
    default: launch<T, HD, 1, W, EARLY>(a, part_size, parts, ws_out, ws_ms, s); break;
  }
}

template <typename T, int HD>
void launch_hd(const AttnArgs& a, int part_size, int parts, bool wide, float* ws_out, float* ws_ms, cudaStream_t s) {
  if constexpr (HD >= 64) {
    if (wide) return launch_g<T, HD, 8, true>(a, part_size, parts, ws_out, ws_ms, s);  // wide implies new_last_only
  }
  if (a.new_last_only)
    launch_g<T, HD, 4, true>(a, part_size, parts, ws_out, ws_ms, s);
  else
    launch_g<T, HD, 4, false>(a, part_size, parts, ws_out, ws_ms, s);
}

}  // namespace

bool attention_mma_supports(int hd) { return hd == 16 || hd == 32 || hd == 64 || hd == 128; }

int attention_mma_heads(int group) {
  for (int g : {16, 8, 4, 2})
    if (group % g == 0) return g;
  return 1;
}

bool attention_mma_wide(int hd) { return hd == 64 || hd == 128; }

bool attention_mma_fuses_new_kv(const AttnArgs& a, int part_size, bool wide) {
  const int tile = wide ? Shape<8>::kTile : Shape<4>::kTile;
  return a.fresh.kv_dst != nullptr && a.new_last_only && a.fresh.tokens == a.n_rows && a.n_groups == a.n_rows &&
         part_size <= 2 * tile;
}

void attention_mma(const AttnArgs& a, int part_size, int parts, bool wide, float* ws_out, float* ws_ms,
                   cudaStream_t s) {
  if (a.groups == nullptr || a.n_groups < 1)
    throw EngineError(ErrorCode::internal, "CUDA attention: no row groups for " + std::to_string(a.n_rows) + " rows");
  ENGINE_DISPATCH_DTYPE(a.dt, {
    switch (a.head_dim) {
      case 16: launch_hd<T, 16>(a, part_size, parts, wide, ws_out, ws_ms, s); break;
      case 32: launch_hd<T, 32>(a, part_size, parts, wide, ws_out, ws_ms, s); break;
      case 64: launch_hd<T, 64>(a, part_size, parts, wide, ws_out, ws_ms, s); break;
      default: launch_hd<T, 128>(a, part_size, parts, wide, ws_out, ws_ms, s); break;
    }
  });
  check_launch("attention (tensor cores)");
}

}  // namespace engine::cuda
