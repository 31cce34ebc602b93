// One warp's 16 tile rows (tokens x query heads) against staged key / value tiles, on tensor cores: q into MMA
// fragments, what each row may see, one 16-position step of S = Q Kᵀ, online softmax and O += P V, and FP8 tiles
// widened for it. Shared by kernels-attention-mma.cu (the warps of a block split a tile's positions) and
// kernels-attention-prefill.cu (each warp its own rows over every position).
#pragma once
#include <cfloat>
#include <climits>
#include <cstdint>

#include "cuda/attention-tiles.cuh"
#include "cuda/attention-window.cuh"
#include "cuda/dtype.cuh"
#include "cuda/kernels.h"
#include "cuda/mma.cuh"
#include "cuda/rope.cuh"

namespace engine::cuda {

// Q as MMA A fragments for every 16-dim step, in the model's dtype: tile row i is token i / G of the group, head
// h0 + i % G. The raw values first, with no branch between the loads (all in flight at once); then (a.fresh:
// add_bias, rotate) the bias and the row's LoRA deltas, and the rotation, whose rotate_half partner (dims d +- HD / 2)
// is this lane's own value of the group 8 dims x HD / 2 / 8 away. rope_cs: (cos, sin) per frequency at the row's
// position.
template <typename T, int HD, int G>
__device__ __forceinline__ void load_q_fragments(const AttnArgs& a, const AttnGroup& grp, int h0, int qr, int qc,
                                                 bool add_bias, bool rotate, const float2* rope_cs,
                                                 uint32_t (&qf)[HD / 16][4]) {
  constexpr int KSTEPS = HD / 16, half = HD / 2;
  constexpr int F = 2 * KSTEPS;  // groups of 8 dims: this lane holds dims 8 f + 2 qc, + 1 of each
  float qx[F][2][2];             // [f][row half h][element]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = qr + 8 * h, t = i / G, g = i % G;
    const int64_t at = static_cast<int64_t>(h0 + g) * HD + 2 * qc;
    const float* q = t < grp.count ? a.q + static_cast<int64_t>(a.rows[grp.first + t].q_row) * a.q_stride + at
                                   : nullptr;
#pragma unroll
    for (int f = 0; f < F; ++f) {
      const float2 v = q != nullptr ? *reinterpret_cast<const float2*>(q + 8 * f) : make_float2(0, 0);
      qx[f][h][0] = v.x;
      qx[f][h][1] = v.y;
    }
    if (add_bias && q != nullptr && a.fresh.bias != nullptr) {
#pragma unroll
      for (int f = 0; f < F; ++f) {
        const float2 b = *reinterpret_cast<const float2*>(a.fresh.bias + at + 8 * f);
        qx[f][h][0] += b.x;
        qx[f][h][1] += b.y;
      }
    }
    const int32_t dg = add_bias && q != nullptr && a.fresh.delta.delta != nullptr
                           ? a.fresh.delta.at[a.rows[grp.first + t].q_row]
                           : -1;
    if (dg >= 0) {  // the row's LoRA deltas (AttnArgs::fresh)
      const float* drow = a.fresh.delta.delta + static_cast<int64_t>(dg) * a.fresh.delta.ld + at;
#pragma unroll
      for (int f = 0; f < F; ++f) {
        const float2 b = *reinterpret_cast<const float2*>(drow + 8 * f);
        qx[f][h][0] += b.x;
        qx[f][h][1] += b.y;
      }
    }
  }
  if (rotate) {
    float r[F][2][2];
#pragma unroll
    for (int f = 0; f < F; ++f)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool first = f < F / 2;  // dims below HD / 2
          const float2 cs = rope_cs[(8 * f + 2 * qc + e) % half];
          r[f][h][e] = rope_pair(qx[f][h][e], qx[first ? f + F / 2 : f - F / 2][h][e], cs, first);
        }
#pragma unroll
    for (int f = 0; f < F; ++f)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) qx[f][h][e] = r[f][h][e];
  }
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int hi = 0; hi < 2; ++hi)
        qf[ks][h + 2 * hi] = Mma<T>::pack(qx[2 * ks + hi][h][0], qx[2 * ks + hi][h][1]);
}

// Which positions the rows of a lane's two fragment row halves h see: [lo[h], lim[h]) — below lo is before its
// window, at or past lim past its context or this partition — and, in a token tree, of the positions from tb[h]
// only those whose bit of vis[h] is set (AttnRow::tree_visible; tb is INT_MAX elsewhere). A tree's rows lie
// within 64 positions of tb, so the shift stays in range.
struct FragMask {
  int lo[2], lim[2], tb[2];
  uint64_t vis[2];
  __device__ __forceinline__ bool sees(int pos, int h) const {
    return pos >= lo[h] && pos < lim[h] && (pos < tb[h] || ((vis[h] >> (pos - tb[h])) & 1u) != 0);
  }
};

// The FragMask of a lane whose fragment rows qr and qr + 8 are tokens (qr + 8 h) / G of `grp`, positions capped at
// `cap` (a partition's end; INT_MAX: none). Rows past the group's see nothing.
template <int G>
__device__ __forceinline__ FragMask frag_mask(const AttnArgs& a, const AttnGroup& grp, int qr, int cap) {
  FragMask fm;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t = (qr + 8 * h) / G;
    fm.lo[h] = fm.lim[h] = 0;
    fm.tb[h] = INT_MAX;
    fm.vis[h] = 0;
    if (t < grp.count) {
      const AttnRow row = a.rows[grp.first + t];
      fm.lo[h] = attn_row_lo(row, a.window);
      fm.lim[h] = min(row.ctx, cap);
      fm.tb[h] = row.tree_base;
      fm.vis[h] = row.tree_visible;
    }
  }
  return fm;
}

// One tile of keys / values (ks, vs in shared memory, positions from t0) for this warp's 16 positions (pw within
// the tile): S = Q Kᵀ, the mask (FragMask), the online softmax update of the running max m (log2 units),
// lane-partial sum l and outputs o, then O += P V.
template <typename T, int HD>
__device__ __forceinline__ void attend_tile(const T* ks, const T* vs, int t0, int pw, int lane, int qc,
                                            const FragMask& fm, ScoreMap sm, const uint32_t (&qf)[HD / 16][4],
                                            float (&o)[HD / 8][4], float (&m)[2], float (&l)[2]) {
  constexpr int RS = row_stride<HD>(), KSTEPS = HD / 16, NT = HD / 8;
  // S = Q Kᵀ for the warp's 16 positions: two n-tiles of 8.
  float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
  for (int k = 0; k < KSTEPS; ++k) {
    uint32_t b[4];
    ldmatrix_x4(b, &ks[(pw + (lane & 7) + ((lane >> 4) & 1) * 8) * RS + 16 * k + ((lane >> 3) & 1) * 8]);
    Mma<T>::run(s[0], qf[k], b[0], b[1]);
    Mma<T>::run(s[1], qf[k], b[2], b[3]);
  }
  // Mask, online softmax per row (the 4 lanes of a row reduce with shuffles).
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pos = t0 + pw + 8 * j + 2 * qc + (e & 1), h = e >> 1;
      float x = s[j][e] * sm.mul;
      if (sm.cap > 0) x = sm.cap * tanhf(x);  // (uniform branch)
      s[j][e] = fm.sees(pos, h) ? x : -INFINITY;
      mx[h] = fmaxf(mx[h], s[j][e]);
    }
  float alpha[2], base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m[h], mx[h]);
    base[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing seen yet keeps zeros
    alpha[h] = exp2f(m[h] - base[h]);
    m[h] = m_new;
  }
  float sum[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[j][e] = exp2f(s[j][e] - base[e >> 1]);
      sum[e >> 1] += s[j][e];
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    o[n][0] *= alpha[0];
    o[n][1] *= alpha[0];
    o[n][2] *= alpha[1];
    o[n][3] *= alpha[1];
  }
  // O += P V: the score accumulators are already the A fragment of P (16 rows x 16 positions).
  const uint32_t pa[4] = {Mma<T>::pack(s[0][0], s[0][1]), Mma<T>::pack(s[0][2], s[0][3]),
                          Mma<T>::pack(s[1][0], s[1][1]), Mma<T>::pack(s[1][2], s[1][3])};
#pragma unroll
  for (int q = 0; q < HD / 16; ++q) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, &vs[(pw + (lane & 7) + ((lane >> 3) & 1) * 8) * RS + 16 * q + ((lane >> 4) & 1) * 8]);
    Mma<T>::run(o[2 * q], pa, b[0], b[1]);
    Mma<T>::run(o[2 * q + 1], pa, b[2], b[3]);
  }
}

// F8: stage `stage`'s e4m3 K / V tiles into the 16-bit tiles attend_tile reads (`tiles`: K then V, kTile rows of
// row_stride each), as their exact values; the scales stay out (ScoreMap, combine_warps).
template <typename T, int HD, int W>
__device__ __forceinline__ void widen_tiles(const uint8_t* stage_mem, int stage, T* tiles, int tid) {
  constexpr int kThreads = Shape<W>::kThreads, kTile = Shape<W>::kTile;
  constexpr int RB = stage_stride<HD, true>(), RS = row_stride<HD>(), VPR = HD / 16;
  const uint8_t* src = stage_mem + stage * 2 * kTile * RB;
  for (int v = tid; v < 2 * kTile * VPR; v += kThreads) {
    const int p = v / VPR, c = v % VPR;  // p: rows of K, then of V
    e4m3x16_to<T>(*reinterpret_cast<const uint4*>(src + p * RB + c * 16), tiles + p * RS + c * 16);
  }
}

}  // namespace engine::cuda
