// Owning handles for device memory (cudaMalloc) and pinned host memory (cudaMallocHost). Plain allocations only:
// no managed memory (it can hang a GPU that is asked for more than it has).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/cuda-check.h"

namespace engine::cuda {

template <bool Pinned>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { reset(bytes); }
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Exactly `bytes` (contents undefined); 0 frees.
  void reset(size_t bytes) {
    release();
    if (bytes == 0) return;
    if constexpr (Pinned)
      check_cuda(cudaMallocHost(&p_, bytes), "cudaMallocHost");
    else
      check_cuda(cudaMalloc(&p_, bytes), "cudaMalloc");
    bytes_ = bytes;
  }
  // At least `bytes`, growing (and losing the contents) only when needed.
  void ensure(size_t bytes) {
    if (bytes > bytes_) reset(bytes);
  }

  void* get() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return p_ == nullptr; }

 private:
  void release() {
    if (p_ == nullptr) return;
    if constexpr (Pinned)
      cudaFreeHost(p_);
    else
      cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<false>;
using PinnedBuffer = Buffer<true>;

}  // namespace engine::cuda
