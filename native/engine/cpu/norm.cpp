#include "cpu/norm.h"

#include <cmath>

namespace engine::cpu {

namespace {
// One vector's RMSNorm (the row of rms_norm, the head of head_rms_norm); `o` may alias `x`.
inline void rms_one(const float* x, float* o, int64_t dim, const float* weight, float eps) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
#pragma omp simd
  for (int64_t i = 0; i < dim; ++i) o[i] = weight[i] * (x[i] * inv);
}
}  // namespace

void rms_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, float eps) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) rms_one(x + r * dim, out + r * dim, dim, weight, eps);
}

void head_rms_norm(float* x, int64_t rows, int64_t stride, int64_t n_heads, int64_t head_dim, const float* weight,
                   float eps) {
#pragma omp parallel for schedule(static) if (rows * n_heads > 1)
  for (int64_t i = 0; i < rows * n_heads; ++i) {
    float* h = x + (i / n_heads) * stride + (i % n_heads) * head_dim;
    rms_one(h, h, head_dim, weight, eps);
  }
}

void layer_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float var = 0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(dim) + eps);
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}

}  // namespace engine::cpu
