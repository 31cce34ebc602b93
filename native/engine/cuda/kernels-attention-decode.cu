// Paged attention for large decode batches (one query row per sequence, every row its own block; the launches of
// small batches keep kernels-attention-mma.cu's EARLY kernels, which read keys before the previous kernel ends).
// The general tensor-core kernel puts tokens x heads in the MMA tile's 16 rows, so a decode row fills only G of
// them, and each warp still holds 16 rows of outputs: 168 registers a thread, 3 blocks an SM, too few blocks in
// flight to hide each one's chain of dependent loads (row, block table, keys). Here the products are turned around —
// Sᵀ = K Qᵀ and Oᵀ = Vᵀ Pᵀ: positions and head dims are the MMA's 16 rows, the block's (up to 8) query heads its 8
// columns — so a warp holds half the output accumulators and half the q fragments (96 registers a thread).
// FP8 pools are read from the staged e4m3 bytes themselves (no widened copy, no pass between two barriers):
// ldmatrix gives a lane four consecutive bytes of a key row, which stand for the MMA's k columns {2c, 2c + 1,
// 2c + 8, 2c + 9} when q's dims are loaded in that same order (a dot product does not mind the order of its
// terms); transposed loads of the value bytes give a lane two dims of two positions, split by byte permutes into
// the A fragments of the even and the odd dims (so output row i of a 16-dim block is dim 2i or 2i + 1). Every
// e4m3 byte becomes its exact value in T (kv-element.cuh), the scales folded in as in the general kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cfloat>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/attention-launch.h"
#include "cuda/attention-tiles.cuh"
#include "cuda/attention-window.cuh"
#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/mma.cuh"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kWarps = 4;
using Block = Shape<kWarps>;
constexpr int kCols = 8;  // MMA columns: the block's query heads, at most 8

// Two e4m3 bytes (the low two of `two`, low first) as two T in one register, exactly.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_as(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    return Mma<T>::pack(f.x, f.y);
  }
}

// An 8x8 matrix of 16-bit elements, one row of two elements a lane (the MMA fragment layout), transposed.
__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// qᵀ as B fragments, per k-step of 16 dims: column r (= lane / 4) is query head h0 + r (zeros from G on); the lane's
// k pairs (2c, 2c + 1) and (2c + 8, 2c + 9) are dims 16 ks + 2c and 16 ks + 8 + 2c, or (F8) 16 ks + 4c and
// 16 ks + 4c + 2 — the order the key bytes arrive in.
template <typename T, int HD, int G, bool F8>
__device__ __forceinline__ void load_q_columns(const AttnArgs& a, int q_row, int h0, int r, int c,
                                               uint32_t (&qb)[HD / 16][2]) {
  const float* q = r < G ? a.q + static_cast<int64_t>(q_row) * a.q_stride + static_cast<int64_t>(h0 + r) * HD
                         : nullptr;
#pragma unroll
  for (int ks = 0; ks < HD / 16; ++ks) {
    float2 lo = make_float2(0, 0), hi = make_float2(0, 0);
    if (q != nullptr) {
      if constexpr (F8) {
        const float4 v = *reinterpret_cast<const float4*>(q + 16 * ks + 4 * c);
        lo = make_float2(v.x, v.y);
        hi = make_float2(v.z, v.w);
      } else {
        lo = *reinterpret_cast<const float2*>(q + 16 * ks + 2 * c);
        hi = *reinterpret_cast<const float2*>(q + 16 * ks + 8 + 2 * c);
      }
    }
    qb[ks][0] = Mma<T>::pack(lo.x, lo.y);
    qb[ks][1] = Mma<T>::pack(hi.x, hi.y);
  }
}

// Output element e of m-tile mt of a lane (rows r, r + 8; columns 2c, 2c + 1): its head dim.
template <int HD, bool F8>
__device__ __forceinline__ int out_dim(int mt, int e, int r) {
  return F8 ? 16 * mt + 2 * r + (e >> 1) : 16 * mt + r + 8 * (e >> 1);
}

// This warp's 16 positions of one staged tile (ks / vs, the warp's first position p0): Sᵀ = K Qᵀ, the mask
// [lo, lim), the online softmax per head column (running max m and lane-partial sum l of columns 2c, 2c + 1, log2
// units), then Oᵀ += Vᵀ Pᵀ.
template <typename T, int HD, bool F8, typename S = KvStore<T, F8>>
__device__ __forceinline__ void attend_positions(const S* ks, const S* vs, int p0, int lane, int lo, int lim,
                                                 ScoreMap sm, const uint32_t (&qb)[HD / 16][2],
                                                 float (&o)[HD / 16][4], float (&m)[2], float (&l)[2]) {
  constexpr int RS = stage_stride<HD, F8>();
  const int r = lane >> 2, mi = lane >> 3, mr = lane & 7;  // mi, mr: the ldmatrix matrix and row this lane addresses
  // Sᵀ: rows = positions (r, r + 8), columns = heads (2c, 2c + 1); two chains of MMAs, summed.
  float s[4] = {0, 0, 0, 0}, s2[4] = {0, 0, 0, 0};
  const S* krow = ks + (mr + (mi & 1) * 8) * RS;
  if constexpr (F8) {
#pragma unroll
    for (int kk = 0; kk < HD / 32; ++kk) {
      uint32_t b[4];  // rows r / r + 8, bytes 4c .. 4c + 3 of dims [32 kk, +16) and [32 kk + 16, +16)
      ldmatrix_x4(b, krow + 32 * kk + (mi >> 1) * 16);
      const uint32_t a0[4] = {e4m3x2_as<T>(b[0]), e4m3x2_as<T>(b[1]), e4m3x2_as<T>(b[0] >> 16),
                              e4m3x2_as<T>(b[1] >> 16)};
      const uint32_t a1[4] = {e4m3x2_as<T>(b[2]), e4m3x2_as<T>(b[3]), e4m3x2_as<T>(b[2] >> 16),
                              e4m3x2_as<T>(b[3] >> 16)};
      Mma<T>::run(s, a0, qb[2 * kk][0], qb[2 * kk][1]);
      Mma<T>::run(s2, a1, qb[2 * kk + 1][0], qb[2 * kk + 1][1]);
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < HD / 32; ++kk) {
      uint32_t a0[4], a1[4];
      ldmatrix_x4(a0, krow + 32 * kk + (mi >> 1) * 8);
      ldmatrix_x4(a1, krow + 32 * kk + 16 + (mi >> 1) * 8);
      Mma<T>::run(s, a0, qb[2 * kk][0], qb[2 * kk][1]);
      Mma<T>::run(s2, a1, qb[2 * kk + 1][0], qb[2 * kk + 1][1]);
    }
  }
  const int pa = p0 + r, pb = pa + 8;
  const bool see_a = pa >= lo && pa < lim, see_b = pb >= lo && pb < lim;
  float x[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float v = (s[e] + s2[e]) * sm.mul;
    if (sm.cap > 0) v = sm.cap * tanhf(v);  // (uniform branch)
    x[e] = (e < 2 ? see_a : see_b) ? v : -INFINITY;
  }
  float alpha[2], base[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = fmaxf(x[j], x[j + 2]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float m_new = fmaxf(m[j], mx);
    base[j] = m_new == -INFINITY ? 0.0f : m_new;  // a column with nothing seen yet keeps zeros
    alpha[j] = exp2f(m[j] - base[j]);
    m[j] = m_new;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) x[e] = exp2f(x[e] - base[e & 1]);
#pragma unroll
  for (int j = 0; j < 2; ++j) l[j] = l[j] * alpha[j] + x[j] + x[j + 2];
#pragma unroll
  for (int mt = 0; mt < HD / 16; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[mt][e] *= alpha[e & 1];
  // Pᵀ as the B fragment (k: positions, n: heads): the lane's weights are positions (r, r + 8) x heads (2c, 2c + 1),
  // the transpose of what the fragment wants, one 8x8 matrix per half of the positions.
  const uint32_t pb0 = transpose8x8(Mma<T>::pack(x[0], x[1]));
  const uint32_t pb1 = transpose8x8(Mma<T>::pack(x[2], x[3]));
  const S* vrow = vs + (mr + (F8 ? (mi & 1) : (mi >> 1)) * 8) * RS;
  if constexpr (F8) {
#pragma unroll
    for (int mm = 0; mm < HD / 32; ++mm) {
      uint32_t v[4];  // positions 2c, 2c + 1 (+ 8) x dims 2r, 2r + 1 of [32 mm, +16) and [32 mm + 16, +16)
      ldmatrix_x4_trans(v, vrow + 32 * mm + (mi >> 1) * 16);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t lo4 = v[2 * h], hi4 = v[2 * h + 1];  // positions 0-7 and 8-15
        const uint32_t a[4] = {e4m3x2_as<T>(__byte_perm(lo4, 0, 0x4420)), e4m3x2_as<T>(__byte_perm(lo4, 0, 0x4431)),
                               e4m3x2_as<T>(__byte_perm(hi4, 0, 0x4420)), e4m3x2_as<T>(__byte_perm(hi4, 0, 0x4431))};
        Mma<T>::run(o[2 * mm + h], a, pb0, pb1);
      }
    }
  } else {
#pragma unroll
    for (int mt = 0; mt < HD / 16; ++mt) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, vrow + 16 * mt + (mi & 1) * 8);
      Mma<T>::run(o[mt], a, pb0, pb1);
    }
  }
}

template <int HD, bool F8>
constexpr size_t decode_smem_bytes() {
  const size_t stages = size_t{2} * 2 * Block::kTile * stage_stride<HD, F8>() * (F8 ? 1 : 2);
  const size_t combine = (size_t{kWarps} * kCols * HD + kWarps * kCols * 2) * sizeof(float);
  return stages > combine ? stages : combine;
}

// grid: (rows, kv heads x head groups per kv head); G query heads a block.
template <typename T, int HD, int G, bool F8>
__global__ void __launch_bounds__(Block::kThreads, 5) attention_decode_kernel(AttnArgs a) {
  static_assert(G <= kCols && HD % 32 == 0, "heads are the MMA's columns; k-steps go in pairs");
  using S = KvStore<T, F8>;
  constexpr int kTile = Block::kTile, RS = stage_stride<HD, F8>(), MT = HD / 16;
  extern __shared__ __align__(16) unsigned char smem[];
  S* stage_mem = reinterpret_cast<S*>(smem);  // [2 stages][K, V][kTile * RS]
  pdl_enter();  // pdl.cuh
  const int group = a.n_heads / a.n_kv, per_kv = group / G;
  const int kvh = blockIdx.y / per_kv, h0 = kvh * group + (blockIdx.y % per_kv) * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, r = lane >> 2, c = lane & 3;
  const AttnRow row = a.rows[blockIdx.x];
  const int lo = attn_row_lo(row, a.window), end = row.ctx;
  const auto load_tile = tile_loader<T, HD, kWarps, false, F8>(a, stage_mem, row.table, kvh, end, tid);
  const int n_tiles = (end - lo + kTile - 1) / kTile;
  if (n_tiles > 0) load_tile(lo, 0, lo, lo + kTile);
  uint32_t qb[MT][2];
  load_q_columns<T, HD, G, F8>(a, row.q_row, h0, r, c, qb);
  float o[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[mt][e] = 0;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  const ScoreMap sm = score_map<F8>(a);
  const int pw = 16 * warp;
  for (int it = 0; it < n_tiles; ++it) {
    const int t0 = lo + it * kTile;
    if (it + 1 < n_tiles) {
      load_tile(t0 + kTile, (it + 1) & 1, t0 + kTile, t0 + 2 * kTile);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile `it` is in shared memory for every warp
    const S* ks = stage_mem + (it & 1) * 2 * kTile * RS + pw * RS;
    if (t0 + pw < end) attend_positions<T, HD, F8>(ks, ks + kTile * RS, t0 + pw, lane, lo, end, sm, qb, o, m, l);
    __syncthreads();  // every warp is done with this stage before it is refilled (or, last, becomes the combine area)
  }
  // The warps' partial results through shared memory: (max, sum) and unnormalised outputs per head column.
  float* red = reinterpret_cast<float*>(smem);  // [kWarps][kCols][HD]
  float* ml = red + kWarps * kCols * HD;        // [kWarps][kCols][2]
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 4);
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 8);
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 16);
    if (r == 0) {
      ml[(warp * kCols + 2 * c + j) * 2] = m[j];
      ml[(warp * kCols + 2 * c + j) * 2 + 1] = l[j];
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[(warp * kCols + 2 * c + (e & 1)) * HD + out_dim<HD, F8>(mt, e, r)] = o[mt][e];
  __syncthreads();
  const float vmul = F8 ? a.kv.v_scale : 1.0f;
  for (int idx = tid; idx < G * HD; idx += Block::kThreads) {
    const int g = idx / HD, d = idx % HD;
    float mm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, ml[(w * kCols + g) * 2]);
    float acc = 0, total = 0;
    if (mm != -INFINITY) {  // (a decode row always sees its own position)
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(ml[(w * kCols + g) * 2] - mm);
        acc += red[(w * kCols + g) * HD + d] * f;
        total += ml[(w * kCols + g) * 2 + 1] * f;
      }
    }
    static_cast<T*>(a.out)[static_cast<int64_t>(blockIdx.x) * a.out_stride + static_cast<int64_t>(h0 + g) * HD + d] =
        from_float<T>(total > 0 ? acc * vmul / total : 0.0f);
  }
}

template <typename T, int HD, int G>
void launch_kv(const AttnArgs& a, cudaStream_t s) {
  const int per_kv = (a.n_heads / a.n_kv) / G;
  const dim3 grid(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.n_kv * per_kv));
  const dim3 block(Block::kThreads);
  if (a.kv.fp8)
    launch_pdl_opted<attention_decode_kernel<T, HD, G, true>, decode_smem_bytes<HD, true>()>(grid, block, s, a);
  else
    launch_pdl_opted<attention_decode_kernel<T, HD, G, false>, decode_smem_bytes<HD, false>()>(grid, block, s, a);
}

template <typename T, int HD>
void launch_g(const AttnArgs& a, cudaStream_t s) {
  switch (attention_decode_heads(a.n_heads / a.n_kv)) {
    case 8: launch_kv<T, HD, 8>(a, s); break;
    case 4: launch_kv<T, HD, 4>(a, s); break;
    case 2: launch_kv<T, HD, 2>(a, s); break;
    default: launch_kv<T, HD, 1>(a, s); break;
  }
}

// TRTLLM_ATTN_DECODE_KERNEL=0: large decode batches take the general tensor-core kernel as before (the comparison
// in bench/RESULTS.md).
bool decode_kernel_on() {
  static const bool on = [] {
    const char* v = std::getenv("TRTLLM_ATTN_DECODE_KERNEL");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

}  // namespace

int attention_decode_heads(int group) {
  for (int g : {8, 4, 2})
    if (group % g == 0) return g;
  return 1;
}

bool attention_decode_applies(const AttnArgs& a, int parts) {
  return decode_kernel_on() && parts == 1 && a.n_groups == a.n_rows && (a.head_dim == 64 || a.head_dim == 128);
}

void attention_decode(const AttnArgs& a, cudaStream_t s) {
  ENGINE_DISPATCH_DTYPE(a.dt, {
    if (a.head_dim == 64)
      launch_g<T, 64>(a, s);
    else
      launch_g<T, 128>(a, s);
  });
  check_launch("attention (decode)");
}

}  // namespace engine::cuda
