// The activations of the CUDA kernels (the same set and formulas as cpu/activation.h), one definition for every
// kernel that applies one.
#pragma once
#include "cuda/kernels.h"

namespace engine::cuda {

__device__ __forceinline__ float apply_act(float x, Act act) {
  switch (act) {
    case Act::silu: return x / (1.0f + expf(-x));
    case Act::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Act::gelu_tanh: {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case Act::relu: return x > 0 ? x : 0.0f;
  }
  return x;
}

}  // namespace engine::cuda
