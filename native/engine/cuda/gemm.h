// The projections' matrix product y = x · wᵀ (w in nn.Linear's [out, in] layout, both in the model dtype, fp32
// accumulation): the engine's own streaming kernel for decode-shaped products (few rows, bound by reading the
// weight), cuBLAS for everything else. FP8 (e4m3) weights: the FP8 GEMV for decode shapes, else activations
// quantized to e4m3 and a cuBLASLt FP8 GEMM with the weight's scales.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>

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

  // The same product with an FP8 weight (kernels.h's Fp8Weight; x and y as xwt). m <= kGemvMaxRows: gemv_fp8
  // (W8A16: x is not quantized). Larger m: x quantized to e4m3 as w.act says (per token; per token and group of
  // 128 columns for block-scaled weights; the static input_scale) into scratch, then one cuBLASLt e4m3 GEMM
  // with fp32 accumulation, the scales applied by cuBLASLt (outer-vector: a scale per weight row and per token;
  // block: 128 x 128 weight tiles and 1 x 128 activation groups). Where cuBLASLt has no kernel for that (block
  // sizes other than 128, k % 16 != 0, a heuristic that returns nothing) or fp8 activations are off, the weight
  // is widened to the model dtype in scratch and xwt runs (said once on stderr per reason).
  // x_quantized: the kernel that made x also quantized it as fp8_activation_plan(m, k, w) said (the quantize
  // pass is skipped; x is still read where the product takes another path for some rows).
  void xwt_fp8(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_f32,
               int64_t ldy, bool accumulate, bool x_quantized = false);
  // Where and how xwt_fp8(m, n, k, .., w) will want x quantized (into this Gemm's scratch, reserved here if it
  // must grow), so that the kernel producing x can do it (kernels.h's Fp8ActOut); false when that product does not
  // quantize x (the GEMV, a widened weight, fp8 activations off).
  bool fp8_activation_plan(int64_t m, int64_t n, int64_t k, const Fp8Weight& w, Fp8ActOut& plan);
  // xwt_rms with an FP8 weight: gemv_fp8_rms when gemv_fp8 serves this shape, else false (nothing enqueued).
  bool xwt_fp8_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps,
                   const Fp8Weight& w, DType dt, void* y, bool y_f32, int64_t ldy);
  // Scratch of the FP8 path sized once for up to `rows` activation rows of up to `max_k` columns, outputs of up
  // to `max_n` columns and weights of up to `max_weight_elems` elements: captured CUDA graphs hold its
  // addresses, so it must not move later.
  void reserve_fp8(int64_t rows, int64_t max_k, int64_t max_n, int64_t max_weight_elems);
  // false: larger products widen the FP8 weight instead of quantizing x (W8A16 everywhere; for comparisons).
  void set_fp8_activations(bool on) { fp8_activations_ = on; }
  // How the last xwt_fp8 ran: "gemv", "cublaslt" or "dequantized" (tests and benchmarks report it).
  const char* last_fp8_path() const { return last_fp8_path_; }
  // Runs before the timing below waits for the stream (Model::set_before_device_wait: a pipelined leader's stream
  // may hold transfers that its followers can only match once they have its plan).
  void set_before_wait(std::function<void()> f) { before_wait_ = std::move(f); }

 private:
  // Decode shapes: the first product of each (m, n, k, output type) outside a graph capture times the engine's
  // GEMV against cuBLAS (into scratch) and remembers the faster; neither wins everywhere.
  bool gemv_faster(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, bool y_f32);
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, bool> choice_;
  std::function<void()> before_wait_;
  DeviceBuffer scratch_;
  void cublas(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_f32,
              int64_t ldy, bool accumulate);
  cublasContext* handle_ = nullptr;
  cudaStream_t stream_;
  DeviceBuffer workspace_;
  bool use_gemv_ = true;

  // FP8 (gemm.cpp): cuBLASLt's handle and cached matmul plans, kept out of this header with cuBLASLt's types.
  struct Lt;
  std::unique_ptr<Lt> lt_;
  // One cuBLASLt e4m3 product of quantized x (xq, xs) and w; false when cuBLASLt has no kernel for it.
  bool lt_fp8(int64_t m, int64_t n, int64_t k, const uint8_t* xq, const float* xs, const Fp8Weight& w, DType dt,
              void* y, bool y_f32, int64_t ldy, bool accumulate);
  void widened(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_f32,
               int64_t ldy, bool accumulate, const std::string& why);
  // xwt_fp8's choice for an m x k product: why the weight must be widened ("" when it need not), else (true) the
  // rows cuBLASLt takes (`plan`: its quantized x; the last tail rows of a block-scaled product go to the GEMV).
  bool fp8_route(int64_t m, int64_t n, int64_t k, const Fp8Weight& w, std::string& why, int64_t& tail,
                 Fp8ActOut& plan);
  DeviceBuffer fp8_x_, fp8_scales_, fp8_wide_;  // quantized x, its scales, a widened weight
  DeviceBuffer fp8_out_;  // a 16-bit product bound for an fp32 y, where cuBLASLt has no fp32 output
  int64_t fp8_rows_ = 0, fp8_k_ = 0, fp8_n_ = 0, fp8_weight_elems_ = 0;
  bool fp8_activations_ = true;
  const char* last_fp8_path_ = "";
  std::set<std::string> said_;  // fallback reasons already logged
};

}  // namespace engine::cuda
