#include "cpu/rope.h"

#include <cmath>

namespace engine::cpu {

std::vector<float> rope_inv_freq(int32_t head_dim, float theta, const RopeScaling& scaling, bool long_factors) {
  const int32_t half = head_dim / 2;
  std::vector<float> inv(half);
  for (int32_t i = 0; i < half; ++i) {
    // transformers computes base ** (arange(0, dim, 2).float() / dim) in fp32; rounding the double result to
    // float lands on the same value or one ulp away, well inside the logits tolerance.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = static_cast<float>(1.0 / std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
  }
  if (scaling.longrope()) {
    // transformers computes 1 / (factor * base ** exponent) in fp32: the product first, then the reciprocal.
    const std::vector<float>& ext = long_factors ? scaling.long_factor : scaling.short_factor;
    for (int32_t i = 0; i < half; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
      const float base = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
      inv[i] = 1.0f / (ext[static_cast<size_t>(i)] * base);
    }
  } else if (scaling.type == "linear") {
    for (float& f : inv) f /= scaling.factor;
  } else if (scaling.type == "llama3") {
    // transformers' _compute_llama3_parameters: long wavelengths are slowed by `factor`, short ones kept, and
    // the band in between is blended smoothly.
    const double pi = 3.14159265358979323846;
    const double old_ctx = scaling.original_max_position_embeddings;
    const double low_wavelen = old_ctx / scaling.low_freq_factor;
    const double high_wavelen = old_ctx / scaling.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2 * pi / f;
      if (wavelen > low_wavelen) {
        f = f / scaling.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - scaling.low_freq_factor) /
                              (scaling.high_freq_factor - scaling.low_freq_factor);
        f = static_cast<float>((1 - smooth) * f / scaling.factor + smooth * f);
      }
    }
  }
  return inv;
}

void rope_tables(const int32_t* positions, int64_t n, const float* inv_freq, int32_t half, float* cos_out,
                 float* sin_out, const float* inv_freq_long, const uint8_t* use_long) {
#pragma omp parallel for schedule(static) if (n * half > 4096)
  for (int64_t t = 0; t < n; ++t) {
    const float p = static_cast<float>(positions[t]);
    const float* inv = use_long != nullptr && use_long[t] ? inv_freq_long : inv_freq;
    for (int32_t i = 0; i < half; ++i) {
      // The angle is rounded to fp32 as transformers does before cos/sin; only then is double precision used.
      const float angle = p * inv[i];
      cos_out[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_out[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void apply_rope(float* x, int64_t n, int64_t row_stride, int32_t n_heads, int32_t half, const float* cos_t,
                const float* sin_t) {
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t t = 0; t < n; ++t) {
    const float* c = cos_t + t * half;
    const float* s = sin_t + t * half;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + t * row_stride + static_cast<int64_t>(h) * 2 * half;
#pragma omp simd
      for (int32_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace engine::cpu
