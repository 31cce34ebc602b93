// Scratch buffers of the CPU model's forward pass: grown to the largest iteration seen and reused, so forward()
// allocates nothing in steady state.
#pragma once
#include <cstddef>
#include <vector>

namespace engine {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace engine
