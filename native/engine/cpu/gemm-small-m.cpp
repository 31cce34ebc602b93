#include "cpu/gemm-small-m.h"

#include <immintrin.h>

#include <algorithm>

namespace engine::cpu {
namespace {

// Generic vectors: with -march=native GCC maps them onto AVX-512 (or two AVX2 halves) without intrinsics.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float vec __attribute__((vector_size(kLanes * sizeof(float))));

inline vec load(const float* p) {
  vec v;
  __builtin_memcpy(&v, p, sizeof(vec));
  return v;
}

// Horizontal sum by halving (a log2 tree of vector adds), not lane by lane: with 16 accumulators per tile and a
// short k the lane-by-lane version cost as much as the multiply-adds themselves.
inline float hsum(vec v) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v));
#elif defined(__AVX__)
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(reinterpret_cast<__m256>(v)), _mm256_extractf128_ps(reinterpret_cast<__m256>(v), 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 0x55));
  return _mm_cvtss_f32(lo);
#else
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
#endif
}

// MR activation rows x NR weight rows: MR*NR accumulators stay in registers; every loaded vector feeds NR or MR
// multiply-adds.
template <int MR, int NR>
inline void tile(int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy, bool accumulate) {
  vec acc[MR][NR] = {};
  const int64_t kv = k - k % kLanes;
  for (int64_t p = 0; p < kv; p += kLanes) {
    vec wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load(w + j * k + p);
    for (int i = 0; i < MR; ++i) {
      const vec xv = load(x + i * ldx + p);
      for (int j = 0; j < NR; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t p = kv; p < k; ++p) s += x[i * ldx + p] * w[j * k + p];
      float* out = y + i * ldy + j;
      *out = accumulate ? *out + s : s;
    }
  }
}

// One block of NR weight rows against every activation row, 4 (then 2, 1) rows at a time: the block (NR x k floats)
// is read from memory once and re-read from L1/L2 by the later groups.
template <int NR>
void column_block(int64_t m, int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy,
                  bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) tile<4, NR>(k, x + i * ldx, ldx, w, y + i * ldy, ldy, accumulate);
  for (; i + 2 <= m; i += 2) tile<2, NR>(k, x + i * ldx, ldx, w, y + i * ldy, ldy, accumulate);
  for (; i < m; ++i) tile<1, NR>(k, x + i * ldx, ldx, w, y + i * ldy, ldy, accumulate);
}

}  // namespace

void gemm_xwt_small_m(int64_t m, int64_t n0, int64_t n1, int64_t k, const float* x, int64_t ldx, const float* w,
                      float* y, int64_t ldy, bool accumulate) {
  int64_t j = n0;
  for (; j + 4 <= n1; j += 4) column_block<4>(m, k, x, ldx, w + j * k, y + j, ldy, accumulate);
  for (; j < n1; ++j) column_block<1>(m, k, x, ldx, w + j * k, y + j, ldy, accumulate);
}

}  // namespace engine::cpu
