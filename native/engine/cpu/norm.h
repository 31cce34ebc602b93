// Normalizations over the hidden dimension, one row per token, computed in fp32 as Hugging Face does.
#pragma once
#include <cstdint>

namespace engine::cpu {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight       x, out: [rows, dim] (may alias); weight: [dim]
void rms_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, float eps);

// rms_norm of each of the n_heads consecutive head_dim-wide heads at the start of each row (row stride `stride`), in
// place: Qwen3's q_norm / k_norm over the query or key heads of the fused qkv rows.
void head_rms_norm(float* x, int64_t rows, int64_t stride, int64_t n_heads, int64_t head_dim, const float* weight,
                   float eps);

// out[r] = (x[r] - mean) * rsqrt(var + eps) * weight + bias  (biased variance, as torch.nn.LayerNorm)
void layer_norm(const float* x, float* out, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps);

}  // namespace engine::cpu
