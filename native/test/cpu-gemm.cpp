// gemm_xwt against a plain double-precision product, over the shapes that pick each code path: m = 1 (GEMV),
// 2..16 (the small-m streaming kernel, every remainder of its 4/2/1 row groups and 4/1 column blocks), larger m
// (BLAS), k with and without a vector tail, with and without accumulate, one and two threads.
#include <cmath>
#include <random>
#include <vector>

#include "check.h"
#include "cpu/gemm.h"

using engine::cpu::gemm_xwt;

static void check_shape(int64_t m, int64_t n, int64_t k, bool accumulate) {
  std::mt19937 rng(static_cast<uint32_t>(m * 1000003 + n * 1009 + k));
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t ldx = k + 3, ldy = n + 5;  // strided rows, as the models pass them
  std::vector<float> x(m * ldx), w(n * k), y(m * ldy);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  for (auto& v : y) v = u(rng);
  std::vector<float> y0 = y;
  gemm_xwt(m, n, k, x.data(), ldx, w.data(), y.data(), ldy, accumulate);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = accumulate ? y0[i * ldy + j] : 0;
      for (int64_t p = 0; p < k; ++p) s += double(x[i * ldx + p]) * w[j * k + p];
      worst = std::max(worst, std::fabs(s - y[i * ldy + j]) / (1.0 + std::fabs(s)));
    }
    for (int64_t j = n; j < ldy; ++j) CHECK(y[i * ldy + j] == y0[i * ldy + j]);  // padding untouched
  }
  CHECK_MSG(worst < 1e-4, "m=%ld n=%ld k=%ld acc=%d: relative error %g", long(m), long(n), long(k), int(accumulate), worst);
}

TEST_MAIN({
  for (int threads : {1, 2}) {
    engine::cpu::set_num_threads(threads);
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 40})
      for (int64_t n : {1, 3, 4, 37, 256})
        for (int64_t k : {1, 15, 16, 17, 512, 1411})
          for (bool acc : {false, true}) check_shape(m, n, k, acc);
  }
})
