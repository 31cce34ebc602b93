#include "cpu/activation.h"

#include <cmath>

#include "errors.h"

namespace engine::cpu {

Activation parse_activation(const std::string& name) {
  if (name == "silu" || name == "swish") return Activation::silu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::gelu_tanh;
  if (name == "relu") return Activation::relu;
  throw EngineError(ErrorCode::unsupported, "activation '" + name + "' is not supported");
}

namespace {
inline float apply(float x, Activation act) {
  switch (act) {
    case Activation::silu: return x / (1.0f + std::exp(-x));
    case Activation::gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::gelu_tanh: {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case Activation::relu: return x > 0 ? x : 0.0f;
  }
  return x;
}
}  // namespace

void activate(float* x, int64_t n, Activation act) {
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) x[i] = apply(x[i], act);
}

void gated_activate(const float* gate_up, float* out, int64_t rows, int64_t inter, Activation act) {
#pragma omp parallel for schedule(static) if (rows * inter > 16384)
  for (int64_t t = 0; t < rows; ++t) {
    const float* g = gate_up + t * 2 * inter;
    const float* u = g + inter;
    float* o = out + t * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = apply(g[i], act) * u[i];
  }
}

}  // namespace engine::cpu
