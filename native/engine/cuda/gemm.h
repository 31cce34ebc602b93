// The projections' matrix product y = x · wᵀ (w in nn.Linear's [out, in] layout, both in the model dtype, fp32
// accumulation): the engine's own streaming kernel for decode-shaped products (few rows, bound by reading the
// weight), cuBLAS for everything else.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "cuda/device-buffer.h"
#include "cuda/kernels.h"

// cuBLAS's handle type (cublasHandle_t is a pointer to it), so that cuBLAS's headers stay in gemm.cpp: the
// decoder's files then compile against the CUDA runtime alone (cuda.cmake compile-checks them without cuBLAS).
struct cublasContext;

namespace engine::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[m, n] = x[m, k] · w[n, k]ᵀ, or y += that when `accumulate`. x, w: dtype `dt`, rows contiguous (ld = k);
  // y: fp32 (y_f32) or dtype `dt`, row stride ldy.
  void xwt(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_f32, int64_t ldy,
           bool accumulate);

  // y[m, n] = (rms_norm(x) * norm_w)[m, k] · w[n, k]ᵀ in one kernel (gemv_rms) when the engine's GEMV is the path
  // xwt would take for this shape; x is fp32 (the residual stream). false: nothing enqueued, the caller normalises
  // and calls xwt.
  bool xwt_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const void* w, DType dt,
               void* y, bool y_f32, int64_t ldy);

  // false: every product through cuBLAS (the benchmark compares both paths).
  void set_use_gemv(bool on) { use_gemv_ = on; }

 private:
  // Decode shapes: the first product of each (m, n, k, output type) outside a graph capture times the engine's
  // GEMV against cuBLAS (into scratch) and remembers the faster; neither wins everywhere.
  bool gemv_faster(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, bool y_f32);
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, bool> choice_;
  DeviceBuffer scratch_;
  void cublas(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_f32,
              int64_t ldy, bool accumulate);
  cublasContext* handle_ = nullptr;
  cudaStream_t stream_;
  DeviceBuffer workspace_;
  bool use_gemv_ = true;
};

}  // namespace engine::cuda
