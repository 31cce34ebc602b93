// Rotary position embeddings with Hugging Face's rotate_half convention: dimension i pairs with i + head_dim/2
// (not interleaved pairs), and frequencies follow transformers' rope-init functions (default, linear, llama3).
#pragma once
#include <cstdint>
#include <vector>

#include "model/model-config.h"

namespace engine::cpu {

// inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim / 2, rescaled per `scaling` (longrope: divided by
// short_factor[i], or long_factor[i] when `long_factors`).  [head_dim / 2]
std::vector<float> rope_inv_freq(int32_t head_dim, float theta, const RopeScaling& scaling, bool long_factors = false);

// cos/sin of position * inv_freq for each token.  positions: [n]; cos, sin: [n, half]. With `use_long` ([n]),
// token t takes inv_freq_long where use_long[t] is set (longrope).
void rope_tables(const int32_t* positions, int64_t n, const float* inv_freq, int32_t half, float* cos_out,
                 float* sin_out, const float* inv_freq_long = nullptr, const uint8_t* use_long = nullptr);

// In place on `n_heads` heads of each row: x: [n, row_stride], head h at x[row * row_stride + h * 2 * half].
void apply_rope(float* x, int64_t n, int64_t row_stride, int32_t n_heads, int32_t half, const float* cos_t,
                const float* sin_t);

}  // namespace engine::cpu
