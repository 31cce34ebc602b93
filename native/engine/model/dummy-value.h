// The value of element `index` of dummy tensor `tensor`: a counter-based hash, uniform on 256 steps of
// [-scale, scale). Shared
// by the host and the CUDA generator (this header compiles under nvcc too), so a CPU model and a GPU model built
// from the same dummy plan hold the same weights, and every tp slice is the slice of one global tensor.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define ENGINE_HOST_DEVICE __host__ __device__
#else
#define ENGINE_HOST_DEVICE
#endif

namespace engine {

ENGINE_HOST_DEVICE inline uint64_t dummy_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

ENGINE_HOST_DEVICE inline float dummy_value(uint64_t seed, uint32_t tensor, uint64_t index, float scale) {
  const uint64_t h = dummy_mix(dummy_mix(seed ^ (static_cast<uint64_t>(tensor) << 40)) + index);
  // k / 128 with k an 8-bit integer in [-128, 128): times a power-of-two scale, exact in fp32, bf16 and fp16, so
  // a CPU model (fp32) and a GPU model (bf16) of the same plan hold bit-identical weights.
  const int32_t k = static_cast<int32_t>(h >> 56) - 128;
  return static_cast<float>(k) * (1.0f / 128.0f) * scale;
}

}  // namespace engine
