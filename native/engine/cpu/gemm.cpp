#include "cpu/gemm.h"

#include "cpu/gemm-small-m.h"

#include <omp.h>

#include <algorithm>

#ifdef ENGINE_HAVE_CBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace engine::cpu {

#ifdef ENGINE_HAVE_CBLAS

namespace {
void blas_xwt(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy,
              bool accumulate) {
  if (m == 1) {
    // Decode of one sequence: GEMV avoids GEMM's packing overhead.
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
                static_cast<int>(k), x, 1, accumulate ? 1.0f : 0.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, x, static_cast<int>(ldx), w, static_cast<int>(k), accumulate ? 1.0f : 0.0f, y,
              static_cast<int>(ldy));
}
}  // namespace

// OpenBLAS runs single-threaded inside our OpenMP threads, each on a slice of the weight's rows (the output's
// columns). Two thread pools (OpenBLAS's pthreads and OpenMP's spinning workers) fighting over the same cores cost
// 2-3x in decode; one pool that stays hot between kernels does not.
void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy,
              bool accumulate) {
  if (m == 0 || n == 0) return;
  const int64_t flops = m * n * k;
  if (flops < (int64_t{1} << 15) || omp_get_max_threads() == 1 || omp_in_parallel()) {
    if (m > 1 && m <= kSmallM) gemm_xwt_small_m(m, 0, n, k, x, ldx, w, y, ldy, accumulate);
    else blas_xwt(m, n, k, x, ldx, w, y, ldy, accumulate);
    return;
  }
  const bool small_m = m <= kSmallM;
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    // Slices are multiples of 16 columns so each thread's rows of w start cache-line aligned.
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t n0 = std::min(n, id * per), n1 = std::min(n, n0 + per);
    if (n1 > n0 && small_m) gemm_xwt_small_m(m, n0, n1, k, x, ldx, w, y, ldy, accumulate);
    else if (n1 > n0) blas_xwt(m, n1 - n0, k, x, ldx, w + n0 * k, y + n0, ldy, accumulate);
  }
}

#else

// Both operands are contiguous along k, so each output is a dot product the compiler vectorizes. Tiles of 4 rows
// of x against 4 rows of w reuse every loaded vector 4 times; tiles of columns spread over threads.
void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy,
              bool accumulate) {
  constexpr int64_t kTileN = 64;
  const int64_t n_tiles = (n + kTileN - 1) / kTileN;
  const int64_t m_tiles = (m + 3) / 4;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t tn = 0; tn < n_tiles; ++tn) {
    for (int64_t tm = 0; tm < m_tiles; ++tm) {
      const int64_t n0 = tn * kTileN, n1 = std::min(n, n0 + kTileN);
      const int64_t m0 = tm * 4, m1 = std::min(m, m0 + 4);
      for (int64_t j = n0; j < n1; j += 4) {
        const int64_t jn = std::min<int64_t>(4, n1 - j);
        float acc[4][4] = {};
        for (int64_t i = m0; i < m1; ++i) {
          const float* xi = x + i * ldx;
          for (int64_t jj = 0; jj < jn; ++jj) {
            const float* wj = w + (j + jj) * k;
            float s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t p = 0; p < k; ++p) s += xi[p] * wj[p];
            acc[i - m0][jj] = s;
          }
        }
        for (int64_t i = m0; i < m1; ++i)
          for (int64_t jj = 0; jj < jn; ++jj) {
            float* out = y + i * ldy + j + jj;
            *out = accumulate ? *out + acc[i - m0][jj] : acc[i - m0][jj];
          }
      }
    }
  }
}

#endif

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
#ifdef ENGINE_HAVE_CBLAS
  openblas_set_num_threads(1);  // parallelism comes from gemm_xwt's OpenMP split, see there
#endif
}

}  // namespace engine::cpu
