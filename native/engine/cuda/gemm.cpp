#include "cuda/gemm.h"

#include <cublas_v2.h>

#include <string>

namespace engine::cuda {
namespace {
void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw EngineError(ErrorCode::internal, std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusString(st));
}
cudaDataType_t cuda_type(DType dt) { return dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F; }
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // fixed, so captured CUDA graphs never see it reallocated
}  // namespace

Gemm::Gemm(cudaStream_t stream) : stream_(stream), workspace_(kWorkspaceBytes) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
  check_cublas(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()), "cublasSetWorkspace");
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void Gemm::xwt(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_f32,
               int64_t ldy, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (use_gemv_ && gemv_applicable(m, k) && gemv_faster(m, n, k, x, w, dt, y_f32)) {
    gemv(m, n, k, x, w, dt, y, y_f32, ldy, accumulate, stream_);
    return;
  }
  cublas(m, n, k, x, w, dt, y, y_f32, ldy, accumulate);
}

bool Gemm::xwt_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const void* w,
                   DType dt, void* y, bool y_f32, int64_t ldy) {
  if (m == 0 || n == 0 || !use_gemv_ || !gemv_applicable(m, k)) return false;
  // The choice is timed with x read as [m, k] of the model dtype (the fp32 rows hold twice that many bytes): the
  // values do not change the time, and the fused kernel is the plain GEMV plus a few loads from L1.
  if (!gemv_faster(m, n, k, x, w, dt, y_f32)) return false;
  gemv_rms(m, n, k, x, norm_w, eps, w, dt, y, y_f32, ldy, stream_);
  return true;
}

void Gemm::cublas(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_f32,
                  int64_t ldy, bool accumulate) {
  // Row-major y[m, n] = x[m, k] · w[n, k]ᵀ is column-major yᵀ[n, m] = w[k, n]ᵀ · xᵀ[k, m].
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                            static_cast<int>(k), &alpha, w, cuda_type(dt), static_cast<int>(k), x, cuda_type(dt),
                            static_cast<int>(k), &beta, y, y_f32 ? CUDA_R_32F : cuda_type(dt), static_cast<int>(ldy),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

bool Gemm::gemv_faster(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, bool y_f32) {
  const auto key = std::make_tuple(m, n, k, y_f32);
  if (auto it = choice_.find(key); it != choice_.end()) return it->second;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusNone) return true;  // no timing inside a capture (callers warm up first)
  scratch_.ensure(static_cast<size_t>(m * n) * 4);
  cudaEvent_t ev[3];
  for (auto& e : ev) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  auto run = [&](bool use_gemv) {
    if (use_gemv)
      gemv(m, n, k, x, w, dt, scratch_.get(), y_f32, n, false, stream_);
    else
      cublas(m, n, k, x, w, dt, scratch_.get(), y_f32, n, false);
  };
  run(true);
  run(false);
  check_cuda(cudaEventRecord(ev[0], stream_), "cudaEventRecord");
  for (int i = 0; i < 3; ++i) run(true);
  check_cuda(cudaEventRecord(ev[1], stream_), "cudaEventRecord");
  for (int i = 0; i < 3; ++i) run(false);
  check_cuda(cudaEventRecord(ev[2], stream_), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(ev[2]), "cudaEventSynchronize");
  float t_gemv = 0, t_cublas = 0;
  cudaEventElapsedTime(&t_gemv, ev[0], ev[1]);
  cudaEventElapsedTime(&t_cublas, ev[1], ev[2]);
  for (auto& e : ev) cudaEventDestroy(e);
  const bool faster = t_gemv <= t_cublas;
  choice_.emplace(key, faster);
  return faster;
}

}  // namespace engine::cuda
