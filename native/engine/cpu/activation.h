// Elementwise MLP activations, named as in config.json (hidden_act / activation_function).
#pragma once
#include <cstdint>
#include <string>

namespace engine::cpu {

enum class Activation { silu, gelu, gelu_tanh, relu };

// "silu"/"swish", "gelu", "gelu_new"/"gelu_pytorch_tanh"/"gelu_fast", "relu"; throws EngineError(unsupported).
Activation parse_activation(const std::string& name);

// x[i] = act(x[i]) for i < n, in place.
void activate(float* x, int64_t n, Activation act);

// SwiGLU-style gating: out[t, i] = act(gate_up[t, i]) * gate_up[t, inter + i].
// gate_up: [rows, 2 * inter] (gate columns first, then up); out: [rows, inter].
void gated_activate(const float* gate_up, float* out, int64_t rows, int64_t inter, Activation act);

}  // namespace engine::cpu
