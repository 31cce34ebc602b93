// Normalizations over the hidden dimension, one row per token, computed in fp32 as Hugging Face does.
#pragma once
#include <cstdint>

namespace engine::cpu {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight       x, out: [rows, dim] (may alias); weight: [dim]
void rms_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, float eps);

// out[r] = (x[r] - mean) * rsqrt(var + eps) * weight + bias  (biased variance, as torch.nn.LayerNorm)
void layer_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps);

}  // namespace engine::cpu
