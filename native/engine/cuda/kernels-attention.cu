// Paged attention for every query row of an iteration (decode tokens and prefill chunks alike): each row attends
// to positions [lo, ctx) of its own sequence, found through its block table (lo: 0, or where its sliding window
// starts, attention-window.cuh). This file plans the launch (when too
// few blocks would leave the GPU idle, as in small-batch decode, each context is split into partitions handled by
// separate blocks and merged by a second kernel: flash-decoding's split-K), holds that merge, and the SIMT kernel
// for the head sizes the tensor-core kernel (kernels-attention-mma.cu) is not built for (256).
// The SIMT kernel: one thread block handles one row, one kv head and G of the query heads that read it (GQA: the kv
// head's keys and values are loaded once for all G). Positions go in tiles of TK: the whole block loads the tile's
// keys and values into shared memory with coalesced 16-byte loads, then the G x TK scores, an online softmax per
// head, and the weighted values come out of shared memory. FP8 pools (--kv-cache-dtype fp8): the tiles stay e4m3
// bytes in shared memory and widen as they are read (kv-element.cuh).
#include <algorithm>
#include <cfloat>
#include <string>

#include "cuda/attention-launch.h"
#include "cuda/attention-window.cuh"
#include "cuda/cp-async.cuh"
#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/kernels.h"
#include "cuda/kv-element.cuh"
#include "cuda/pdl.cuh"
#include "model/model.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxParts = 64;  // partitions of one context at most
// The fewest positions a partition holds. A token tree's row sees every position before its tree and itself (the
// last of its context), so a partition within its context that it sees nothing of would lie wholly between its tree's
// first position and its own: fewer than kMaxTreeTokens positions. Partitions are never that short, so every cell
// the merge reads of such a row holds something.
constexpr int kMinPartSize = 64;
static_assert(kMinPartSize >= kMaxTreeTokens, "a tree row's partitions each hold a position it sees");

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Scores of one tile (positions from t0): G x TK dot products of the (pre-scaled) queries with the tile's keys (S:
// the pool's elements, kv-element.cuh), soft-capped when softcap > 0, -inf past the n positions in the context and,
// for a token tree's row, at positions from row.tree_base it does not see (AttnRow) (lanes of a warp take
// consecutive positions of one head).
template <typename S, int HD, int G, int TK, int RS>
__device__ __forceinline__ void tile_scores(const S* ks, const float (&qs)[G][HD], float (&sc)[G][TK], int t0, int n,
                                            const AttnRow& row, float softcap, int tid) {
  constexpr int VPR = HD / 8;                                     // 8-element loads per key row
  constexpr int SCORES = (G * TK + kThreads - 1) / kThreads;     // scores per thread
#pragma unroll
  for (int j = 0; j < SCORES; ++j) {
    const int idx = tid + j * kThreads;
    if (idx >= G * TK) break;
    const int g = idx / TK, p = idx % TK;
    float dot = -INFINITY;
    const int pos = t0 + p;
    if (p < n && (pos < row.tree_base || ((row.tree_visible >> (pos - row.tree_base)) & 1u) != 0)) {
      dot = 0;
#pragma unroll
      for (int c = 0; c < VPR; ++c) {
        float kf[8];
        kv_load<S, 8>(&ks[p * RS + c * 8], kf);
        const float4 qa = *reinterpret_cast<const float4*>(&qs[g][c * 8]);
        const float4 qb = *reinterpret_cast<const float4*>(&qs[g][c * 8 + 4]);
        dot += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] +
               qb.z * kf[6] + qb.w * kf[7];
      }
      if (softcap > 0) dot = attn_soft_cap(dot, softcap);
    }
    sc[g][p] = dot;
  }
}

// Online softmax over one tile's scores, one warp per head: the tile's max, its weights in place of the scores,
// the running max m_s / sum l_s, and alpha_s, the factor the accumulated outputs are rescaled by. A masked score
// weighs 0 even while nothing of the row is seen yet (a token tree's tile of positions it does not see: the max is
// -inf then, and -inf - -inf is not a number).
template <int G, int TK>
__device__ __forceinline__ void tile_softmax(float (&sc)[G][TK], float (&m_s)[G], float (&l_s)[G],
                                             float (&alpha_s)[G], int n, int warp, int lane) {
  for (int g = warp; g < G; g += kWarps) {
    float mx = -INFINITY;
    for (int p = lane; p < TK; p += 32) mx = fmaxf(mx, sc[g][p]);
    mx = warp_max(mx);
    const float m_old = m_s[g], m_new = fmaxf(m_old, mx);
    float sum = 0;
    for (int p = lane; p < TK; p += 32) {
      const float e = p < n && sc[g][p] != -INFINITY ? expf(sc[g][p] - m_new) : 0.0f;
      sc[g][p] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
      alpha_s[g] = alpha;
      l_s[g] = l_s[g] * alpha + sum;
      m_s[g] = m_new;
    }
  }
}

// This thread's QUADS groups of 4 output dims (of row r, heads h0 ..), times vmul (an FP8 pool's v scale):
// normalised into a.out, or (split context) unnormalised into this partition's cell of the workspace with the
// row's running max and sum.
template <typename T, int HD, int G, int QUADS>
__device__ __forceinline__ void write_partition(const AttnArgs& a, int r, int h0, const float (&acc)[QUADS][4],
                                                const float (&m_s)[G], const float (&l_s)[G], float vmul, int tid,
                                                float* ws_out, float* ws_ms) {
  const bool split = gridDim.z > 1;
#pragma unroll
  for (int j = 0; j < QUADS; ++j) {
    const int idx = tid + j * kThreads;
    if (idx >= G * HD / 4) break;
    const int g = (4 * idx) / HD, d = (4 * idx) % HD;
    if (!split) {
      T* o = static_cast<T*>(a.out) + static_cast<int64_t>(r) * a.out_stride + static_cast<int64_t>(h0 + g) * HD + d;
#pragma unroll
      for (int e = 0; e < 4; ++e) o[e] = from_float<T>(acc[j][e] * vmul / l_s[g]);
    } else {
      const int64_t cell = (static_cast<int64_t>(r) * a.n_heads + h0 + g) * gridDim.z + blockIdx.z;
#pragma unroll
      for (int e = 0; e < 4; ++e) ws_out[cell * HD + d + e] = acc[j][e] * vmul;
      if (d == 0) {
        ws_ms[cell * 2] = m_s[g];
        ws_ms[cell * 2 + 1] = l_s[g];
      }
    }
  }
}

// grid: (n_rows, n_kv * head groups, partitions); ws_out: [n_rows, n_heads, parts, HD]; ws_ms: [.., 2] (max, sum).
// F8: the pools hold e4m3 bytes (a.kv); the k scale goes into the queries' scale, the v scale into the output.
template <typename T, int HD, int G, bool F8>
__global__ void __launch_bounds__(kThreads, 5) attention_kernel(AttnArgs a, int part_size, float* ws_out, float* ws_ms) {
  pdl_enter();  // pdl.cuh
  using S = KvStore<T, F8>;                    // the pools' element (kv-element.cuh)
  constexpr int EPV = 16 / static_cast<int>(sizeof(S));  // elements per 16-byte vector
  constexpr int TK = HD >= 256 ? 32 : 64;      // positions per tile
  constexpr int RS = HD + EPV;                 // shared row stride (elements): 16-byte reads conflict-free
  constexpr int VPR = HD / EPV;                // 16-byte vectors per key / value row
  constexpr int LOADS = (TK * VPR + kThreads - 1) / kThreads;  // per thread, per tile, for K and for V
  constexpr int QUADS = (G * HD / 4 + kThreads - 1) / kThreads;  // groups of 4 output dims per thread
  __shared__ __align__(16) S ks[TK * RS];
  __shared__ __align__(16) S vs[TK * RS];
  __shared__ __align__(16) float qs[G][HD];
  __shared__ float sc[G][TK];
  __shared__ float m_s[G], l_s[G], alpha_s[G];
  __shared__ int64_t slot_s[TK];

  const int r = blockIdx.x;
  const int group = a.n_heads / a.n_kv;
  const int per_kv = group / G;
  const int kvh = blockIdx.y / per_kv;
  const int h0 = kvh * group + (blockIdx.y % per_kv) * G;
  const AttnRow row = a.rows[r];
  // Partitions count from the one holding the row's first visible position (attention-window.cuh); tiles start
  // at that position, so nothing below the window is read, not even its block-table entries.
  const int lo = attn_row_lo(row, a.window);
  const int start = (static_cast<int>(blockIdx.z) + lo / part_size) * part_size;
  if (start >= row.ctx) return;  // this row's context ends before the partition (the merge skips it)
  const int begin = max(start, lo), end = min(row.ctx, start + part_size);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  const float q_mul = F8 ? a.scale * a.kv.k_scale : a.scale;
  for (int i = tid; i < G * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    qs[g][d] = a.q[static_cast<int64_t>(row.q_row) * a.q_stride + static_cast<int64_t>(h0 + g) * HD + d] * q_mul;
  }
  if (tid < G) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0;
  }
  const S* k_pool = static_cast<const S*>(a.k_pool);
  const S* v_pool = static_cast<const S*>(a.v_pool);
  const int32_t* table = a.block_tables + row.table;
  const int tpb = a.tokens_per_block;
  const int64_t block_stride = static_cast<int64_t>(a.n_kv) * tpb * HD;

  float acc[QUADS][4];
#pragma unroll
  for (int i = 0; i < QUADS; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0;

  for (int t0 = begin; t0 < end; t0 += TK) {
    const int n = min(TK, end - t0);
    // 1. Where each position of the tile lives, then every key and value vector of the tile, loaded at once.
    if (tid < n) {
      const int p = t0 + tid;
      slot_s[tid] = static_cast<int64_t>(table[p / tpb]) * block_stride + (static_cast<int64_t>(kvh) * tpb + p % tpb) * HD;
    }
    __syncthreads();  // slot_s ready; the previous tile's reads of ks / vs / sc are done
    // Global -> shared without a detour through registers (cp.async), all of the tile's copies in flight at once.
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const int v = tid + j * kThreads, p = v / VPR, c = v % VPR;
      if (v < TK * VPR && p < n) {
        copy16_async(&ks[p * RS + c * EPV], k_pool + slot_s[p] + c * EPV);
        copy16_async(&vs[p * RS + c * EPV], v_pool + slot_s[p] + c * EPV);
      }
    }
    cp_async_wait_all();
    __syncthreads();
    // 2. Scores.
    tile_scores<S, HD, G, TK, RS>(ks, qs, sc, t0, n, row, a.softcap, tid);
    __syncthreads();
    // 3. Online softmax.
    tile_softmax<G, TK>(sc, m_s, l_s, alpha_s, n, warp, lane);
    __syncthreads();
    // 4. Weighted values: each thread owns QUADS groups of 4 consecutive output dims of one head.
#pragma unroll
    for (int j = 0; j < QUADS; ++j) {
      const int idx = tid + j * kThreads;
      if (idx >= G * HD / 4) break;
      const int g = (4 * idx) / HD, d = (4 * idx) % HD;
      float s4[4] = {0, 0, 0, 0};
      for (int p = 0; p < n; ++p) {
        const float w = sc[g][p];
        float v[4];
        kv_load<S, 4>(&vs[p * RS + d], v);
#pragma unroll
        for (int e = 0; e < 4; ++e) s4[e] += w * v[e];
      }
      const float alpha = alpha_s[g];
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = acc[j][e] * alpha + s4[e];
    }
    __syncthreads();  // (also at the next tile's top) ks / vs / sc are reused
  }

  write_partition<T, HD, G, QUADS>(a, r, h0, acc, m_s, l_s, F8 ? a.kv.v_scale : 1.0f, tid, ws_out, ws_ms);
}

// grid: (n_rows, n_heads). Merges the partitions a row's visible positions span: its cells 0 .. used - 1
// (attention-window.cuh); the kernels wrote every one of them, and no other cell of the row is read.
template <typename T>
__global__ void merge_kernel(AttnArgs a, int part_size, int parts, const float* ws_out, const float* ws_ms) {
  const int r = blockIdx.x, h = blockIdx.y, hd = a.head_dim;
  const int used = attn_row_parts(a.rows[r], a.window, part_size);  // (metadata: readable before the wait)
  pdl_enter();  // pdl.cuh
  const int64_t base = (static_cast<int64_t>(r) * a.n_heads + h) * parts;
  float m = -INFINITY;
  for (int p = 0; p < used; ++p) m = fmaxf(m, ws_ms[(base + p) * 2]);
  float total = 0;
  for (int p = 0; p < used; ++p) total += ws_ms[(base + p) * 2 + 1] * expf(ws_ms[(base + p) * 2] - m);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float s = 0;
    for (int p = 0; p < used; ++p) s += ws_out[(base + p) * hd + d] * expf(ws_ms[(base + p) * 2] - m);
    static_cast<T*>(a.out)[static_cast<int64_t>(r) * a.out_stride + static_cast<int64_t>(h) * hd + d] =
        from_float<T>(s / total);
  }
}

// Query heads per SIMT block: the largest power of two dividing the GQA group, at most 8, with G * HD <= 1024
// (each lane accumulates G * HD / 32 values).
int heads_per_block(int group, int hd) {
  for (int g : {8, 4, 2}) if (group % g == 0 && g * hd <= 1024) return g;
  return 1;
}

// Thread blocks of one partition: (row groups or rows) x kv heads x head groups per kv head.
int64_t blocks_per_part(const AttnArgs& a) {
  const int group = a.n_heads / a.n_kv;
  if (attention_mma_supports(a.head_dim))
    return static_cast<int64_t>(a.n_groups) * a.n_kv * (group / attention_mma_heads(group));
  return static_cast<int64_t>(a.n_rows) * a.n_kv * (group / heads_per_block(group, a.head_dim));
}

struct Split {
  int part_size, parts;
};

// Too few blocks to fill the GPU (small-batch decode): split each context so that about two waves of blocks exist.
// `reach`: positions one block row (a row, or a group of rows) spans at most, max_ctx without a window. A
// windowed launch splits its reach, not the whole context: its rows' partitions start at their windows
// (attention-window.cuh), and a reach that starts inside a partition spans one partition more than reach /
// part_size, hence one part fewer wanted (so that parts never exceed `want`, attention_workspace_bound's count).
Split choose_split(int64_t blocks, int32_t max_ctx, int32_t reach, int num_sms) {
  const int ctx = max_ctx < 1 ? 1 : max_ctx;
  const int span = reach < 1 ? 1 : std::min(reach, ctx);
  if (blocks >= 2 * static_cast<int64_t>(num_sms) || span <= 64) return {ctx, 1};
  const bool windowed = span < ctx;
  int64_t want = (2 * static_cast<int64_t>(num_sms) + blocks - 1) / blocks;
  if (want > kMaxParts) want = kMaxParts;
  if (windowed) want = std::max<int64_t>(want - 1, 1);
  int64_t part = (span + want - 1) / want;
  part = (part + 31) / 32 * 32;
  if (part < kMinPartSize) part = kMinPartSize;
  int64_t parts = (ctx + part - 1) / part;
  if (windowed) parts = std::min(parts, (span + part - 1) / part + 1);
  return {static_cast<int>(part), static_cast<int>(parts)};
}

// The most positions one block row spans: max_ctx, or under a layer window (which every row's cap only narrows)
// the window plus the rows of a group after the first (consecutive positions, each a window of its own).
int32_t launch_reach(const AttnArgs& a) {
  if (a.window <= 0) return a.max_ctx;
  const int64_t reach = static_cast<int64_t>(a.window) + attention_rows_per_group(a.n_heads, a.n_kv, a.head_dim) - 1;
  return static_cast<int32_t>(std::min<int64_t>(reach, a.max_ctx));
}

// A small decode batch (a launch that would split) whose contexts fit two tiles of the 8-warp tensor-core block
// (256 positions) takes that block unsplit: its keys and values are read before the qkv kernel has finished
// (new_last_only), and neither partitions nor the merge kernel are needed. Measured on an H200 (Llama-3-8B shape,
// 128-token prompt) against splitting with the same early reads: batch 8 0.06-0.12 ms faster per step, batch 1
// within the run-to-run spread; at 1,000 or 4,000 positions the 4-warp blocks over many partitions stay faster
// (batch 1 at 1,000: 4.62 against 4.76 ms), so longer contexts still split.
constexpr int kWideMaxCtx = 256;
bool use_wide(const AttnArgs& a, int64_t blocks, int num_sms) {
  return a.new_last_only && attention_mma_wide(a.head_dim) && a.max_ctx <= kWideMaxCtx &&
         blocks < 2 * static_cast<int64_t>(num_sms);
}
Split plan_split(const AttnArgs& a, int num_sms) {
  const int64_t blocks = blocks_per_part(a);
  if (use_wide(a, blocks, num_sms)) return {a.max_ctx < 1 ? 1 : a.max_ctx, 1};
  return choose_split(blocks, a.max_ctx, launch_reach(a), num_sms);
}

template <typename T, int HD, int G>
void launch(const AttnArgs& a, const Split& sp, float* ws_out, float* ws_ms, cudaStream_t s) {
  const int per_kv = (a.n_heads / a.n_kv) / G;
  const dim3 grid(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.n_kv * per_kv),
                  static_cast<unsigned>(sp.parts));
  if (a.kv.fp8)
    launch_pdl(attention_kernel<T, HD, G, true>, grid, dim3(kThreads), s, a, sp.part_size, ws_out, ws_ms);
  else
    launch_pdl(attention_kernel<T, HD, G, false>, grid, dim3(kThreads), s, a, sp.part_size, ws_out, ws_ms);
  check_launch("attention");
}

template <typename T, int HD>
void launch_hd(const AttnArgs& a, const Split& sp, float* ws_out, float* ws_ms, cudaStream_t s) {
  switch (heads_per_block(a.n_heads / a.n_kv, HD)) {
    case 8: if constexpr (8 * HD <= 1024) { launch<T, HD, 8>(a, sp, ws_out, ws_ms, s); return; } break;
    case 4: if constexpr (4 * HD <= 1024) { launch<T, HD, 4>(a, sp, ws_out, ws_ms, s); return; } break;
    case 2: if constexpr (2 * HD <= 1024) { launch<T, HD, 2>(a, sp, ws_out, ws_ms, s); return; } break;
    default: break;
  }
  launch<T, HD, 1>(a, sp, ws_out, ws_ms, s);
}

// a.fresh through the separate kernel (every token's keys / values, also of tokens no row attends from).
void write_fresh(const AttnArgs& a, cudaStream_t s) {
  rope_and_write_kv(a.q, a.fresh.tokens, a.q_stride, a.fresh.bias, a.n_heads, a.n_kv, a.head_dim, a.fresh.positions,
                    a.fresh.inv_freq, a.fresh.use_long, a.k_pool, a.v_pool, a.dt, a.kv, a.fresh.kv_dst,
                    a.tokens_per_block, s, a.fresh.delta);
}

}  // namespace

bool attention_supports_head_dim(int32_t hd) { return hd == 16 || hd == 32 || hd == 64 || hd == 128 || hd == 256; }

int32_t attention_rows_per_group(int32_t n_heads, int32_t n_kv, int32_t head_dim) {
  if (!attention_mma_supports(head_dim)) return 1;
  return 16 / attention_mma_heads(n_heads / n_kv);
}

int32_t attention_prefill_rows_per_group(int32_t n_heads, int32_t n_kv, int32_t head_dim) {
  if (head_dim != 64 && head_dim != 128) return 0;
  return kAttentionPrefillWarps * attention_rows_per_group(n_heads, n_kv, head_dim);
}

size_t attention_workspace_floats(const AttnArgs& a, int32_t num_sms) {
  if (a.n_rows == 0) return 0;
  const Split sp = plan_split(a, num_sms);
  if (sp.parts == 1) return 0;
  return static_cast<size_t>(a.n_rows) * a.n_heads * sp.parts * (a.head_dim + 2);
}

size_t attention_workspace_bound(int32_t n_heads, int32_t n_kv, int32_t head_dim, int32_t num_sms) {
  // A split happens only while the blocks of one partition are fewer than 2 * num_sms, into at most
  // ceil(2 * num_sms / blocks) partitions; each block row serves at most attention_rows_per_group() rows.
  AttnArgs a{};
  a.n_heads = n_heads;
  a.n_kv = n_kv;
  a.head_dim = head_dim;
  const int64_t per_group = attention_rows_per_group(n_heads, n_kv, head_dim);
  size_t worst = 0;
  for (int32_t units = 1;; ++units) {
    a.n_rows = a.n_groups = units;
    const int64_t blocks = blocks_per_part(a);
    if (blocks >= 2 * static_cast<int64_t>(num_sms)) break;
    int64_t want = (2 * static_cast<int64_t>(num_sms) + blocks - 1) / blocks;
    if (want > kMaxParts) want = kMaxParts;
    worst = std::max(worst, static_cast<size_t>(units * per_group * n_heads * want));
  }
  return worst * (head_dim + 2);
}

void attention(const AttnArgs& a, float* workspace, int32_t num_sms, cudaStream_t s) {
  const bool fresh = a.fresh.kv_dst != nullptr;
  if (a.n_rows == 0) {
    if (fresh) write_fresh(a, s);
    return;
  }
  if (!attention_supports_head_dim(a.head_dim))
    throw EngineError(ErrorCode::unsupported, "CUDA attention: head_dim " + std::to_string(a.head_dim) +
                                                  " is not supported (16, 32, 64, 128, 256)");
  const bool mma = attention_mma_supports(a.head_dim);
  if (mma && attention_prefill_applies(a, num_sms)) {  // prompt rows (kernels-attention-prefill.cu)
    AttnArgs b = a;
    if (fresh) write_fresh(a, s);
    b.fresh = NewKv{};
    attention_prefill(b, s);
    return;
  }
  const Split sp = plan_split(a, num_sms);
  float* ws_out = workspace;
  float* ws_ms = workspace + static_cast<int64_t>(a.n_rows) * a.n_heads * sp.parts * a.head_dim;
  // Reading keys / values before the wait (the EARLY kernels) only for small batches: batch 64 / 256 of the 8B
  // shape were 1-5 % slower with it in a build that chose at run time, and are unchanged with the plain kernel.
  const int64_t blocks = blocks_per_part(a);
  AttnArgs b = a;
  b.new_last_only = mma && a.new_last_only && blocks < 2 * static_cast<int64_t>(num_sms);
  // The EARLY kernels also rotate q and write the new keys / values when the launch's shape allows.
  const bool wide = use_wide(a, blocks, num_sms);
  // Larger decode batches: the kernel whose MMA columns are the query heads (kernels-attention-decode.cu).
  const bool decode = mma && a.new_last_only && !b.new_last_only && attention_decode_applies(a, sp.parts);
  if (fresh && (decode || !attention_mma_fuses_new_kv(b, sp.part_size, wide))) {
    write_fresh(a, s);
    b.fresh = NewKv{};
  }
  if (decode) {
    attention_decode(b, s);
  } else if (mma) {
    attention_mma(b, sp.part_size, sp.parts, wide, ws_out, ws_ms, s);
  } else {
    ENGINE_DISPATCH_DTYPE(a.dt, (launch_hd<T, 256>(b, sp, ws_out, ws_ms, s)));
  }
  if (sp.parts > 1) {
    ENGINE_DISPATCH_DTYPE(a.dt, (launch_pdl(merge_kernel<T>, dim3(static_cast<unsigned>(a.n_rows),
                                                                  static_cast<unsigned>(a.n_heads)),
                                            dim3(128), s, a, sp.part_size, sp.parts, ws_out, ws_ms)));
    check_launch("attention merge");
  }
}

}  // namespace engine::cuda
