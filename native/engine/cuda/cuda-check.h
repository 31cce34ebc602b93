// CUDA / cuBLAS status checks that turn failures into EngineError naming the call, for host code of the backend.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "errors.h"

namespace engine::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what) {
  // Out of memory is the user's to fix (smaller batch / KV fraction); anything else is a bug or a broken device.
  const ErrorCode code = e == cudaErrorMemoryAllocation ? ErrorCode::invalid_argument : ErrorCode::internal;
  throw EngineError(code, std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(e));
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}

// After a kernel launch: a bad configuration shows up here, a fault only at the next synchronisation.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace engine::cuda
