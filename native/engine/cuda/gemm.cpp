#include "cuda/gemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace engine::cuda {
namespace {
void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw EngineError(ErrorCode::internal, std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusString(st));
}
cudaDataType_t cuda_type(DType dt) { return dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F; }
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // fixed, so captured CUDA graphs never see it reallocated
constexpr int64_t kLtBlock = 128;  // the only block size cuBLASLt's block scaling takes

int64_t round_up4(int64_t v) { return (v + 3) / 4 * 4; }
bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}
}  // namespace

// A plan per (m, n, k, ldy, scaling, output type): descriptors and the heuristic's algorithm, made once (the
// heuristic costs tens of microseconds); the scale pointers are set on each call.
struct Gemm::Lt {
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
  };
  cublasLtHandle_t handle = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int>, Plan> plans;

  Lt() { check_cublas(cublasLtCreate(&handle), "cublasLtCreate"); }
  ~Lt() {
    for (auto& [key, p] : plans) {
      if (p.c) cublasLtMatrixLayoutDestroy(p.c);
      if (p.b) cublasLtMatrixLayoutDestroy(p.b);
      if (p.a) cublasLtMatrixLayoutDestroy(p.a);
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }
    if (handle) cublasLtDestroy(handle);
  }

  // Row-major y[m, n] = x[m, k] · w[n, k]ᵀ as cuBLASLt's column-major D[n, m] = op(A) · B with A = w stored
  // [k, n] and transposed, B = x stored [k, m]: the "TN" form FP8 needs on Hopper. The weight is A, so its
  // per-row scales are the outer vector of D's rows (or its 128 x 128 tiles), x's per-token scales that of D's
  // columns (or its 1 x 128 groups along k).
  // The scale pointers must be set before the heuristic (it refuses non-scalar scale modes without them).
  Plan& plan(int64_t m, int64_t n, int64_t k, int64_t ldy, bool block, cudaDataType_t out, size_t workspace,
             const void* a_scale, const void* b_scale) {
    const auto key = std::make_tuple(m, n, k, ldy, block, static_cast<int>(out));
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan& p = plans[key];
    check_cublas(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, tb);
    const cublasLtMatmulMatrixScale_t a_mode =
        block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const cublasLtMatmulMatrixScale_t b_mode =
        block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode);
    set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode);
    set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
    set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n, k), "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, m, k), "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.c, out, n, m, ldy), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof(workspace)),
                 "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p.ok) p.algo = result.algo;
    return p;
  }

  template <typename V>
  static void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
    check_cublas(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)), "cublasLtMatmulDescSetAttribute");
  }
};

Gemm::Gemm(cudaStream_t stream) : stream_(stream), workspace_(kWorkspaceBytes), lt_(std::make_unique<Lt>()) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
  check_cublas(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()), "cublasSetWorkspace");
}

Gemm::~Gemm() {
  lt_.reset();
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
  if (before_wait_) before_wait_();  // (ensure may free the old scratch, which waits for the device too)
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

namespace engine::cuda {

void Gemm::reserve_fp8(int64_t rows, int64_t max_k, int64_t max_n, int64_t max_weight_elems) {
  fp8_rows_ = std::max(fp8_rows_, rows);
  fp8_k_ = std::max(fp8_k_, max_k);
  fp8_n_ = std::max(fp8_n_, max_n);
  fp8_out_.ensure(static_cast<size_t>(fp8_rows_ * fp8_n_) * 2);
  fp8_weight_elems_ = std::max(fp8_weight_elems_, max_weight_elems);
  fp8_x_.ensure(static_cast<size_t>(fp8_rows_ * fp8_k_));
  // Per token, or per token and 128-column group (token-major, the token count rounded up to 4 as cuBLASLt reads
  // block scales).
  const int64_t groups = (fp8_k_ + kLtBlock - 1) / kLtBlock;
  fp8_scales_.ensure(sizeof(float) * static_cast<size_t>(std::max(fp8_rows_, groups * round_up4(fp8_rows_))));
}

bool Gemm::fp8_route(int64_t m, int64_t n, int64_t k, const Fp8Weight& w, std::string& why, int64_t& tail,
                     Fp8ActOut& plan) {
  why.clear();
  tail = 0;
  if (!fp8_activations_) return false;
  if (k % 16 != 0) {
    why = "k " + std::to_string(k) + " is not a multiple of 16";
    return false;
  }
  if (w.block != 0 && w.block != kLtBlock) {
    why = "block size " + std::to_string(w.block) + " (cuBLASLt scales 128 x 128 blocks only)";
    return false;
  }
  if (m > fp8_rows_ || k > fp8_k_) {
    if (capturing(stream_))
      throw EngineError(ErrorCode::internal, "FP8 scratch reserved for " + std::to_string(fp8_rows_) + " x " +
                                                 std::to_string(fp8_k_) + " is too small for " + std::to_string(m) +
                                                 " x " + std::to_string(k) + " inside a graph capture");
    reserve_fp8(m, k, n, fp8_weight_elems_);
  }
  // cuBLASLt's block scaling wants the token count a multiple of 4: the last m % 4 rows go through the GEMV
  // (W8A16), the rest through cuBLASLt.
  tail = w.block != 0 && m > 4 ? m % 4 : 0;
  if (tail != 0 && !gemv_fp8_applicable(tail, k, w)) tail = 0;
  const int64_t lt_rows = m - tail;
  plan = Fp8ActOut{};
  plan.q = fp8_x_.as<uint8_t>();
  plan.scales = fp8_scales_.as<float>();
  plan.rows = lt_rows;
  if (w.block != 0) {
    plan.mode = Fp8Quant::group;
    plan.group = static_cast<int32_t>(kLtBlock);
    plan.scale_ld = round_up4(lt_rows);
  } else if (w.act == Fp8Activation::static_tensor) {
    plan.mode = Fp8Quant::fixed;
    plan.fixed = w.input_scale;
  } else {
    plan.mode = Fp8Quant::row;
  }
  return true;
}

bool Gemm::fp8_activation_plan(int64_t m, int64_t n, int64_t k, const Fp8Weight& w, Fp8ActOut& plan) {
  if (m == 0 || n == 0 || gemv_fp8_applicable(m, k, w)) return false;
  std::string why;
  int64_t tail = 0;
  return fp8_route(m, n, k, w, why, tail, plan);
}

void Gemm::xwt_fp8(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_f32,
                   int64_t ldy, bool accumulate, bool x_quantized) {
  if (m == 0 || n == 0) return;
  if (gemv_fp8_applicable(m, k, w)) {
    last_fp8_path_ = "gemv";
    gemv_fp8(m, n, k, x, w, dt, y, y_f32, ldy, accumulate, stream_);
    return;
  }
  std::string why;
  int64_t tail = 0;
  Fp8ActOut plan;
  if (!fp8_route(m, n, k, w, why, tail, plan)) return widened(m, n, k, x, w, dt, y, y_f32, ldy, accumulate, why);
  uint8_t* xq = plan.q;
  float* xs = plan.scales;
  if (tail != 0) {
    const size_t es = dtype_size(dt);
    gemv_fp8(tail, n, k, static_cast<const char*>(x) + static_cast<size_t>((m - tail) * k) * es, w, dt,
             static_cast<char*>(y) + static_cast<size_t>((m - tail) * ldy) * (y_f32 ? 4 : es), y_f32, ldy, accumulate,
             stream_);
    m -= tail;
  }
  const char* done = m != 0 && tail != 0 ? "cublaslt+gemv" : "cublaslt";
  if (!x_quantized) quantize_e4m3(x, dt, m, k, plan.mode, plan.group, plan.fixed, xq, xs, plan.scale_ld, stream_);
  if (lt_fp8(m, n, k, xq, xs, w, dt, y, y_f32, ldy, accumulate)) {
    last_fp8_path_ = done;
    return;
  }
  // No fp32 output for this shape: a 16-bit product into scratch, added to y.
  if (y_f32 && n <= fp8_n_ && lt_fp8(m, n, k, xq, xs, w, dt, fp8_out_.get(), false, n, false)) {
    add_to_f32(fp8_out_.get(), dt, m, n, static_cast<float*>(y), ldy, accumulate, stream_);
    last_fp8_path_ = "cublaslt-16";
    return;
  }
  widened(m, n, k, x, w, dt, y, y_f32, ldy, accumulate,
          std::string("cuBLASLt has no FP8 kernel for ") + (w.block ? "128 x 128 block" : "per-row") +
              " scales with " + (y_f32 ? "fp32" : "16-bit") + " output, m " + std::to_string(m) + ", n " +
              std::to_string(n) + ", k " + std::to_string(k));
}

bool Gemm::xwt_fp8_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps,
                       const Fp8Weight& w, DType dt, void* y, bool y_f32, int64_t ldy) {
  if (m == 0 || n == 0 || !gemv_fp8_applicable(m, k, w)) return false;
  last_fp8_path_ = "gemv";
  gemv_fp8_rms(m, n, k, x, norm_w, eps, w, dt, y, y_f32, ldy, stream_);
  return true;
}

bool Gemm::lt_fp8(int64_t m, int64_t n, int64_t k, const uint8_t* xq, const float* xs, const Fp8Weight& w, DType dt,
                  void* y, bool y_f32, int64_t ldy, bool accumulate) {
  const cudaDataType_t out = y_f32 ? CUDA_R_32F : cuda_type(dt);
  const void* a_scale = w.scales;
  const void* b_scale = xs;
  Lt::Plan& p = lt_->plan(m, n, k, ldy, w.block != 0, out, workspace_.bytes(), a_scale, b_scale);
  if (!p.ok) return false;
  Lt::set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
  Lt::set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_->handle, p.desc, &alpha, w.data, p.a, xq, p.b, &beta, y, p.c, y, p.c,
                                           &p.algo, workspace_.get(), workspace_.bytes(), stream_);
  if (st == CUBLAS_STATUS_SUCCESS) return true;
  p.ok = false;  // (the next call of this shape goes straight to the fallback)
  return false;
}

void Gemm::widened(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_f32,
                   int64_t ldy, bool accumulate, const std::string& why) {
  if (!why.empty() && said_.insert(why).second)
    std::fprintf(stderr, "engine: FP8 weight [%lld, %lld] runs widened to 16 bits: %s\n", static_cast<long long>(n),
                 static_cast<long long>(k), why.c_str());
  const size_t bytes = static_cast<size_t>(std::max(n * k, fp8_weight_elems_)) * dtype_size(dt);
  if (bytes > fp8_wide_.bytes()) {
    if (capturing(stream_))
      throw EngineError(ErrorCode::internal, "FP8 widening scratch must grow inside a graph capture");
    fp8_wide_.ensure(bytes);  // at the largest FP8 weight at once, so that it never moves under a captured graph
  }
  dequantize_e4m3(w, n, k, fp8_wide_.get(), dt, stream_);
  last_fp8_path_ = "dequantized";
  xwt(m, n, k, x, fp8_wide_.get(), dt, y, y_f32, ldy, accumulate);
}

}  // namespace engine::cuda
