// FP8 (e4m3) weights on the GPU (built and registered only with the CUDA backend; skipped without a GPU):
//  - the weight quantization kernel (--quantization fp8, dummy weights) gives the very bytes and scales of the
//    host's quantize_per_channel;
//  - Gemm::xwt_fp8 against a float64 host product of the dequantized weight, for each scale kind (tensor with a
//    static input scale, channel with per-token activations, 128 x 128 and 32 x 32 blocks with per-group
//    activations), shapes whose n and k are not multiples of 128, decode rows (the FP8 GEMV, W8A16: exact
//    weights, so ~1e-6) and larger m (activations quantized, cuBLASLt: judged against the same product of the
//    activations quantized on the host, and the activation quantization's own error reported), fp32 / bf16
//    output, accumulation, and the fused-RMSNorm GEMV; the decode rows take the tensor-core GEMV where k is a
//    multiple of 64 (kernels-fp8-mma.cu), the SIMT one elsewhere, and fp16 activations too;
//  - tiny-llama quantized per channel at load: context logits and greedy tokens of the CUDA model against the CPU
//    model running the same dequantized weights, with activation quantization off (W8A16) and on;
//  - bad inputs: an unknown quantization, scales that do not fit the matrix.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/cuda-decoder.h"
#include "cuda/fp8-gemv-mma.h"
#include "cuda/fp8-weights.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "loading/checkpoint.h"
#include "loading/safetensors.h"
#include "loading/weight-reader.h"
#include "model/llama.h"
#include "model/model-config.h"

using namespace engine;
using cudatest::rel_err;

namespace {

cudaStream_t g_stream;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (no NaNs here)
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
cuda::DeviceBuffer upload(const std::vector<T>& v) {
  cuda::DeviceBuffer b(v.size() * sizeof(T));
  cuda::check_cuda(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return b;
}
template <typename T>
std::vector<T> download(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  cuda::check_cuda(cudaStreamSynchronize(g_stream), "sync");
  cuda::check_cuda(cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return v;
}

// A weight whose rows (and blocks) differ in magnitude, so that every scale matters.
std::vector<float> random_weight(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w[static_cast<size_t>(r * k + c)] = nd(rng) * 0.01f * static_cast<float>(1 + r % 7) * (c / 96 % 2 ? 3.0f : 1.0f);
  return w;
}

Fp8Matrix quantize(const std::vector<float>& w, int64_t n, int64_t k, Fp8ScaleKind kind, int32_t block) {
  if (kind == Fp8ScaleKind::channel) return quantize_per_channel(w.data(), n, k);
  Fp8Matrix m;
  m.rows = n;
  m.cols = k;
  m.scale_kind = kind;
  if (kind == Fp8ScaleKind::block) m.block = block;  // (dequantize() divides by it whatever the kind)
  m.data.resize(w.size());
  const int64_t br = kind == Fp8ScaleKind::tensor ? 1 : (n + block - 1) / block;
  const int64_t bc = kind == Fp8ScaleKind::tensor ? 1 : (k + block - 1) / block;
  const int64_t eb = kind == Fp8ScaleKind::tensor ? std::max(n, k) : block;
  m.scales.assign(static_cast<size_t>(br * bc), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      float& s = m.scales[static_cast<size_t>((r / eb) * bc + c / eb)];
      s = std::max(s, std::fabs(w[static_cast<size_t>(r * k + c)]));
    }
  for (float& s : m.scales) s = s > 0 ? s / 448.0f : 1.0f;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      m.data[static_cast<size_t>(r * k + c)] =
          encode_e4m3(w[static_cast<size_t>(r * k + c)] / m.scales[static_cast<size_t>((r / eb) * bc + c / eb)]);
  return m;
}

// x rows quantized as the GEMM path does: per row, per group of `group` columns, or with one fixed scale.
std::vector<float> quantize_activations(const std::vector<float>& x, int64_t m, int64_t k, int32_t group,
                                        float fixed) {
  std::vector<float> out(x.size());
  const int64_t g = group > 0 ? group : k;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c0 = 0; c0 < k; c0 += g) {
      const int64_t c1 = std::min(k, c0 + g);
      float s = fixed;
      if (fixed == 0) {
        float amax = 0;
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * k + c)]));
        s = amax > 0 ? amax / 448.0f : 1.0f;
      }
      for (int64_t c = c0; c < c1; ++c) {
        const size_t i = static_cast<size_t>(r * k + c);
        out[i] = decode_e4m3(encode_e4m3(x[i] / s)) * s;
      }
    }
  return out;
}

std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                             int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t c = 0; c < k; ++c)
        s += static_cast<double>(x[static_cast<size_t>(r * k + c)]) * w[static_cast<size_t>(j * k + c)];
      y[static_cast<size_t>(r * n + j)] = static_cast<float>(s);
    }
  return y;
}

void quantization_kernel_matches_host() {
  const int64_t n = 37, k = 200;
  std::vector<float> w = random_weight(n, k, 7);
  for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(5 * k + c)] = 0;           // zero row: scale 1
  w[static_cast<size_t>(9 * k + 3)] = 3e4f;                                          // one huge value
  std::vector<uint16_t> wb(w.size());
  for (size_t i = 0; i < w.size(); ++i) wb[i] = to_bf16(w[i]);
  std::vector<float> wf(w.size());
  for (size_t i = 0; i < w.size(); ++i) wf[i] = from_bf16(wb[i]);
  const Fp8Matrix want = quantize_per_channel(wf.data(), n, k);
  cuda::DeviceBuffer dw = upload(wb);
  cuda::DFp8 d;
  cuda::quantize_fp8(dw.get(), cuda::DType::bf16, n, k, d, g_stream);
  const std::vector<uint8_t> bytes = download<uint8_t>(d.data, static_cast<size_t>(n * k));
  const std::vector<float> scales = download<float>(d.scales, static_cast<size_t>(n));
  size_t diff = 0;
  for (size_t i = 0; i < bytes.size(); ++i) diff += bytes[i] != want.data[i];
  CHECK_MSG(diff == 0, "%zu of %zu e4m3 bytes differ from quantize_per_channel", diff, bytes.size());
  CHECK_MSG(scales == want.scales, "per-channel scales differ from quantize_per_channel");
  CHECK(scales[5] == 1.0f);
  std::printf("weight quantization kernel: %zu bytes and %lld scales equal the host's quantize_per_channel\n",
              bytes.size(), static_cast<long long>(n));
}

// norm_e4m3 / gated_activation_e4m3 (the kernels that quantize the rows they make, from registers where the row
// fits or by reading it back) and the separate pass from registers against norm / gated_activation followed by the
// separate quantize pass reading its rows back (quantize_row): the same
// 16-bit outputs, e4m3 bytes and scales, bit for bit, in every quantization mode, over shapes on both sides of the
// register paths' limits (row width, a group that is not a power-of-two number of vectors, widths not a multiple
// of the vector) and with fewer rows quantized than made.
void fused_quantization_matches_separate() {
  std::mt19937 rng(2024);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Mode {
    cuda::Fp8Quant mode;
    int32_t group;
    float fixed;
  };
  const Mode modes[] = {{cuda::Fp8Quant::row, 0, 1},      {cuda::Fp8Quant::group, 128, 1},
                        {cuda::Fp8Quant::group, 64, 1},  {cuda::Fp8Quant::group, 96, 1},
                        {cuda::Fp8Quant::group, 256, 1}, {cuda::Fp8Quant::fixed, 0, 0.05f}};
  auto f16_bits = [](float v, cuda::DType dt) {
    return dt == cuda::DType::bf16 ? to_bf16(v) : __half_as_ushort(__float2half_rn(v));
  };
  int cases = 0, mismatched = 0;
  // make(out, qa) runs the fused kernel when qa is set, else the plain one; the separate pass quantizes its output.
  auto compare = [&](const char* what, int64_t rows, int64_t cols, int64_t qrows, const Mode& m, cuda::DType dt,
                     const std::function<void(cuda::DeviceBuffer&, const cuda::Fp8ActOut*)>& make) {
    const int64_t groups = m.mode == cuda::Fp8Quant::group ? (cols + m.group - 1) / m.group : 1;
    const size_t nscale = static_cast<size_t>(groups * rows);
    cuda::DeviceBuffer out_f(static_cast<size_t>(rows * cols) * 2), out_s(static_cast<size_t>(rows * cols) * 2);
    cuda::DeviceBuffer q_f(static_cast<size_t>(rows * cols)), q_s(static_cast<size_t>(rows * cols));
    cuda::DeviceBuffer sc_f(nscale * 4), sc_s(nscale * 4);
    for (cuda::DeviceBuffer* b : {&q_f, &q_s, &sc_f, &sc_s})
      cuda::check_cuda(cudaMemset(b->get(), 0, b->bytes()), "memset");
    cuda::Fp8ActOut qa;
    qa.q = static_cast<uint8_t*>(q_f.get());
    qa.scales = static_cast<float*>(sc_f.get());
    qa.scale_ld = rows;
    qa.rows = qrows;
    qa.mode = m.mode;
    qa.group = m.group;
    qa.fixed = m.fixed;
    make(out_f, &qa);
    make(out_s, nullptr);
    // The reference: the separate pass reading its rows element by element (quantize_row); the separate pass from
    // registers (its default where the row fits) must give the same too.
    cuda::quantize_e4m3(out_s.get(), dt, qrows, cols, m.mode, m.group, m.fixed, static_cast<uint8_t*>(q_s.get()),
                        static_cast<float*>(sc_s.get()), rows, g_stream, /*from_registers=*/false);
    cuda::DeviceBuffer q_r(static_cast<size_t>(rows * cols)), sc_r(nscale * 4);
    for (cuda::DeviceBuffer* b : {&q_r, &sc_r}) cuda::check_cuda(cudaMemset(b->get(), 0, b->bytes()), "memset");
    cuda::quantize_e4m3(out_s.get(), dt, qrows, cols, m.mode, m.group, m.fixed, static_cast<uint8_t*>(q_r.get()),
                        static_cast<float*>(sc_r.get()), rows, g_stream);
    const std::vector<uint8_t> want_q = download<uint8_t>(q_s, static_cast<size_t>(qrows * cols));
    const std::vector<float> want_s = download<float>(sc_s, nscale);
    const bool same = download<uint16_t>(out_f, static_cast<size_t>(rows * cols)) ==
                          download<uint16_t>(out_s, static_cast<size_t>(rows * cols)) &&
                      download<uint8_t>(q_f, static_cast<size_t>(qrows * cols)) == want_q &&
                      download<float>(sc_f, nscale) == want_s;
    const bool separate_same = download<uint8_t>(q_r, static_cast<size_t>(qrows * cols)) == want_q &&
                               download<float>(sc_r, nscale) == want_s;
    CHECK_MSG(separate_same, "%s %s: %lld rows x %lld, mode %d group %d: the separate pass from registers differs from "
                             "quantize_row", what, dt == cuda::DType::bf16 ? "bf16" : "fp16", static_cast<long long>(qrows),
              static_cast<long long>(cols), static_cast<int>(m.mode), m.group);
    ++cases;
    if (!same) ++mismatched;
    CHECK_MSG(same, "%s %s: %lld rows (%lld quantized) x %lld, mode %d group %d: fused outputs / bytes / scales differ "
                    "from the separate pass", what, dt == cuda::DType::bf16 ? "bf16" : "fp16",
              static_cast<long long>(rows), static_cast<long long>(qrows), static_cast<long long>(cols),
              static_cast<int>(m.mode), m.group);
  };
  for (cuda::DType dt : {cuda::DType::bf16, cuda::DType::f16}) {
    for (int64_t dim : {64, 200, 4096, 5120, 8192, 16384, 18000, 130}) {
      for (int64_t rows : {1, 7}) {
        std::vector<float> x(static_cast<size_t>(rows * dim)), w(static_cast<size_t>(dim));
        for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 97 == 0 ? 20.0f : 1.0f);
        for (float& v : w) v = 0.5f + 0.1f * nd(rng);
        cuda::DeviceBuffer dx = upload(x), dw = upload(w);
        for (const Mode& m : modes)
          compare("norm_e4m3", rows, dim, rows == 1 ? 1 : rows - 2, m, dt,
                  [&](cuda::DeviceBuffer& out, const cuda::Fp8ActOut* qa) {
                    if (qa) cuda::norm_e4m3(static_cast<const float*>(dx.get()), out.get(), dt, rows, dim,
                                            static_cast<const float*>(dw.get()), nullptr, 1e-5f, *qa, g_stream);
                    else cuda::norm(static_cast<const float*>(dx.get()), out.get(), dt, rows, dim,
                                    static_cast<const float*>(dw.get()), nullptr, 1e-5f, g_stream);
                  });
      }
    }
    for (int64_t inter : {64, 256, 1000, 14336, 28672, 36000, 100}) {
      for (int64_t rows : {1, 5}) {
        for (bool bias : {false, true}) {
          std::vector<uint16_t> gu(static_cast<size_t>(rows * 2 * inter));
          for (size_t i = 0; i < gu.size(); ++i) gu[i] = f16_bits(nd(rng) * (i % 89 == 0 ? 8.0f : 1.0f), dt);
          std::vector<float> b(static_cast<size_t>(2 * inter));
          for (float& v : b) v = 0.1f * nd(rng);
          cuda::DeviceBuffer dgu = upload(gu), db = upload(b);
          const float* bp = bias ? static_cast<const float*>(db.get()) : nullptr;
          const cuda::Act act = bias ? cuda::Act::gelu : cuda::Act::silu;
          for (const Mode& m : modes)
            compare("gated_activation_e4m3", rows, inter, rows == 1 ? 1 : rows - 1, m, dt,
                    [&](cuda::DeviceBuffer& out, const cuda::Fp8ActOut* qa) {
                      if (qa)
                        cuda::gated_activation_e4m3(dgu.get(), out.get(), dt, rows, inter, act, bp, *qa, g_stream);
                      else cuda::gated_activation(dgu.get(), out.get(), dt, rows, inter, act, bp, g_stream);
                    });
        }
      }
    }
  }
  std::printf("fused activation quantization: %d of %d (kernel, shape, mode) cases give the separate pass's outputs, "
              "bytes and scales bit for bit\n", cases - mismatched, cases);
}

struct Kind {
  const char* name;
  Fp8ScaleKind kind;
  int32_t block;
  bool static_act;  // a fixed input_scale (with the tensor kind, as ModelOpt)
};

// xwt_fp8 of one kind and shape for several m against float64 references.
void gemm_case(cuda::Gemm& gemm, const Kind& kd, int64_t n, int64_t k, const std::vector<int64_t>& ms) {
  const std::vector<float> w = random_weight(n, k, static_cast<uint32_t>(n * 31 + k));
  Fp8Matrix q = quantize(w, n, k, kd.kind, kd.block);
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  std::mt19937 rng(static_cast<uint32_t>(k));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> xb(static_cast<size_t>(max_m * k));
  std::vector<float> xf(xb.size());
  float xmax = 0;
  for (size_t i = 0; i < xb.size(); ++i) {
    xb[i] = to_bf16(nd(rng) * (i % 13 == 0 ? 4.0f : 1.0f));
    xf[i] = from_bf16(xb[i]);
    xmax = std::max(xmax, std::fabs(xf[i]));
  }
  if (kd.static_act) {
    q.activation = Fp8Activation::static_tensor;
    q.input_scale = xmax / 448.0f;  // a calibrated scale: no value of these rows saturates
  } else if (kd.kind == Fp8ScaleKind::block) {
    q.activation = Fp8Activation::dynamic_token_group;
  }
  const std::vector<float> wd = dequantize(q);
  cuda::DFp8 d;
  cuda::upload_fp8(q, d, g_stream);
  const cuda::Fp8Weight fw = d.view();
  cuda::DeviceBuffer dx = upload(xb);
  cuda::DeviceBuffer dy(static_cast<size_t>(max_m * n) * 4);
  for (int64_t m : ms) {
    std::vector<float> x(xf.begin(), xf.begin() + m * k);
    const std::vector<float> want = reference(x, wd, m, n, k);
    const std::string label = std::string(kd.name) + " n " + std::to_string(n) + " k " + std::to_string(k) + " m " +
                              std::to_string(m);
    // W8A16: activations as given (the GEMV for decode rows, the widened weight past them).
    gemm.set_fp8_activations(false);
    gemm.xwt_fp8(m, n, k, dx.get(), fw, cuda::DType::bf16, dy.get(), true, n, false);
    std::string path = gemm.last_fp8_path();
    std::vector<float> got = download<float>(dy, static_cast<size_t>(m * n));
    const double e16 = rel_err(got.data(), want.data(), got.size());
    // The GEMV multiplies the exact weights; the widened weight is rounded to bf16 first.
    const double tol16 = path == "gemv" ? 1e-5 : 1e-2;
    CHECK_MSG(e16 < tol16, "%s W8A16 (%s): rel err %g", label.c_str(), path.c_str(), e16);
    gemm.set_fp8_activations(true);
    if (m <= cuda::kGemvMaxRows) {
      std::printf("%s: W8A16 %s rel err %.2e\n", label.c_str(), path.c_str(), e16);
      continue;
    }
    // W8A8: against the product of the activations quantized on the host the same way.
    const int32_t group = kd.kind == Fp8ScaleKind::block ? 128 : 0;
    const std::vector<float> xq = quantize_activations(x, m, k, group, kd.static_act ? q.input_scale : 0.0f);
    const std::vector<float> want_q_all = reference(xq, wd, m, n, k);
    gemm.xwt_fp8(m, n, k, dx.get(), fw, cuda::DType::bf16, dy.get(), true, n, false);
    const std::string path8 = gemm.last_fp8_path();
    // The rows each path served: quantized x through cuBLASLt, x as given through the GEMV tail (block scales,
    // m % 4 rows) or the widened fallback.
    const int64_t fp8_rows = path8 == "dequantized" ? 0 : path8 == "cublaslt+gemv" ? m - m % 4 : m;
    std::vector<float> want_q(want);
    std::copy(want_q_all.begin(), want_q_all.begin() + fp8_rows * n, want_q.begin());
    got = download<float>(dy, static_cast<size_t>(m * n));
    const double e8q = rel_err(got.data(), want_q.data(), got.size());
    const double e8 = rel_err(got.data(), want.data(), got.size());
    const double tol8 = path8 == "dequantized" ? 1e-2 : 2e-3;
    CHECK_MSG(e8q < tol8, "%s W8A8 (%s): rel err %g vs the host's product of the rows' activations", label.c_str(),
              path8.c_str(), e8q);
    CHECK_MSG(e8 < 0.08, "%s W8A8: rel err %g vs the unquantized activations", label.c_str(), e8);
    // Per-row scales (tensor, channel) and 128 x 128 blocks with k % 128 == 0 must run as FP8 GEMMs; 32 x 32
    // blocks cannot (cuBLASLt takes 128 only).
    if (kd.kind != Fp8ScaleKind::block || (kd.block == 128 && k % 128 == 0))
      CHECK_MSG(path8.rfind("cublaslt", 0) == 0, "%s: ran %s, not a cuBLASLt FP8 GEMM", label.c_str(), path8.c_str());
    if (kd.block == 32) CHECK(path8 == "dequantized");
    // Accumulation onto y, and bf16 output.
    std::vector<float> y0(static_cast<size_t>(m * n));
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
    cuda::check_cuda(cudaMemcpy(dy.get(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice), "upload y");
    gemm.xwt_fp8(m, n, k, dx.get(), fw, cuda::DType::bf16, dy.get(), true, n, true);
    got = download<float>(dy, static_cast<size_t>(m * n));
    std::vector<float> want_acc(want_q);
    for (size_t i = 0; i < y0.size(); ++i) want_acc[i] += y0[i];
    const double e_acc = rel_err(got.data(), want_acc.data(), got.size());
    CHECK_MSG(e_acc < tol8, "%s W8A8 accumulate: rel err %g", label.c_str(), e_acc);
    gemm.xwt_fp8(m, n, k, dx.get(), fw, cuda::DType::bf16, dy.get(), false, n, false);
    const std::vector<uint16_t> got16 = download<uint16_t>(dy, static_cast<size_t>(m * n));
    std::vector<float> got16f(got16.size());
    for (size_t i = 0; i < got16.size(); ++i) got16f[i] = from_bf16(got16[i]);
    const double e_bf16 = rel_err(got16f.data(), want_q.data(), got16f.size());
    CHECK_MSG(e_bf16 < 1e-2, "%s W8A8 bf16 out (%s): rel err %g", label.c_str(), gemm.last_fp8_path(), e_bf16);
    std::printf("%s: W8A16 %s rel err %.2e; W8A8 %s rel err %.2e vs quantized x (%.2e accumulating, %.2e bf16 out), "
                "%.2e vs x (activation quantization)\n",
                label.c_str(), path.c_str(), e16, path8.c_str(), e8q, e_acc, e_bf16, e8);
  }
}

void gemv_rms_case(cuda::Gemm& gemm, int64_t n, int64_t k, int64_t m) {
  const std::vector<float> w = random_weight(n, k, 99);
  const Fp8Matrix q = quantize_per_channel(w.data(), n, k);
  const std::vector<float> wd = dequantize(q);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k)), g(static_cast<size_t>(k)), xn(x.size());
  for (float& v : x) v = nd(rng) * 3.0f;
  for (float& v : g) v = 0.5f + std::fabs(nd(rng));
  const float eps = 1e-5f;
  for (int64_t r = 0; r < m; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < k; ++c) ss += static_cast<double>(x[static_cast<size_t>(r * k + c)]) * x[static_cast<size_t>(r * k + c)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(k) + eps);
    for (int64_t c = 0; c < k; ++c)
      xn[static_cast<size_t>(r * k + c)] = static_cast<float>(x[static_cast<size_t>(r * k + c)] * inv * g[static_cast<size_t>(c)]);
  }
  // The tensor-core GEMV feeds x * g to its MMAs rounded to bf16 (then the row's 1 / rms), as the norm kernel's
  // bf16 output would be; the SIMT one never rounds it.
  cuda::DFp8 d;
  cuda::upload_fp8(q, d, g_stream);
  const bool mma = cuda::gemv_fp8_mma_applicable(m, k, d.view());
  if (mma)
    for (int64_t r = 0; r < m; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < k; ++c) ss += static_cast<double>(x[static_cast<size_t>(r * k + c)]) * x[static_cast<size_t>(r * k + c)];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(k) + eps);
      for (int64_t c = 0; c < k; ++c) {
        const size_t i = static_cast<size_t>(r * k + c);
        xn[i] = static_cast<float>(from_bf16(to_bf16(x[i] * g[static_cast<size_t>(c)])) * inv);
      }
    }
  const std::vector<float> want = reference(xn, wd, m, n, k);
  cuda::DeviceBuffer dx = upload(x), dg = upload(g), dy(static_cast<size_t>(m * n) * 4);
  const bool ran = gemm.xwt_fp8_rms(m, n, k, dx.as<float>(), dg.as<float>(), eps, d.view(), cuda::DType::bf16,
                                    dy.get(), true, n);
  CHECK(ran);
  const std::vector<float> got = download<float>(dy, static_cast<size_t>(m * n));
  const double e = rel_err(got.data(), want.data(), got.size());
  CHECK_MSG(e < 1e-5, "gemv_fp8_rms n %lld k %lld m %lld: rel err %g", static_cast<long long>(n),
            static_cast<long long>(k), static_cast<long long>(m), e);
  std::printf("fused rms-norm FP8 GEMV (%s) n %lld k %lld m %lld: rel err %.2e\n", mma ? "tensor cores" : "SIMT",
              static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m), e);
}

// The decode GEMV with fp16 activations (the tensor-core kernel's other widening) against the float64 product:
// x on a 1/64 grid, exact in fp16.
void gemv_f16_case(int64_t n, int64_t k, int64_t m, int32_t block) {
  const std::vector<float> w = random_weight(n, k, 7);
  Fp8Matrix q = quantize_per_channel(w.data(), n, k);
  if (block > 0) {  // the same bytes under block scales of 2^-3 .. 2^3 (exact), to check the block indexing
    const int64_t rb = (n + block - 1) / block, cb = (k + block - 1) / block;
    q.scale_kind = Fp8ScaleKind::block;
    q.block = block;
    q.scales.assign(static_cast<size_t>(rb * cb), 1.0f);
    for (int64_t i = 0; i < rb * cb; ++i) q.scales[static_cast<size_t>(i)] = std::ldexp(1.0f, static_cast<int>(i % 7) - 3);
  }
  const std::vector<float> wd = dequantize(q);
  std::vector<float> x(static_cast<size_t>(m * k));
  std::vector<uint16_t> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 129) - 64) / 64.0f;
    xh[i] = f32_to_f16(x[i]);
  }
  const std::vector<float> want = reference(x, wd, m, n, k);
  cuda::DFp8 d;
  cuda::upload_fp8(q, d, g_stream);
  cuda::DeviceBuffer dx = upload(xh), dy(static_cast<size_t>(m * n) * 4);
  cuda::gemv_fp8(m, n, k, dx.get(), d.view(), cuda::DType::f16, dy.get(), true, n, false, g_stream);
  cuda::check_cuda(cudaStreamSynchronize(g_stream), "gemv_fp8 f16");
  const std::vector<float> got = download<float>(dy, static_cast<size_t>(m * n));
  const double e = rel_err(got.data(), want.data(), got.size());
  const bool mma = cuda::gemv_fp8_mma_applicable(m, k, d.view());
  CHECK_MSG(e < 1e-5, "gemv_fp8 fp16 n %lld k %lld m %lld block %d: rel err %g", static_cast<long long>(n),
            static_cast<long long>(k), static_cast<long long>(m), block, e);
  std::printf("FP8 GEMV fp16 activations (%s) n %lld k %lld m %lld block %d: rel err %.2e\n",
              mma ? "tensor cores" : "SIMT", static_cast<long long>(n), static_cast<long long>(k),
              static_cast<long long>(m), block, e);
}

void gemm_against_reference() {
  cuda::Gemm gemm(g_stream);
  gemm.reserve_fp8(160, 2304, 1536, 1536 * 2304);
  const Kind kinds[] = {{"tensor+static", Fp8ScaleKind::tensor, 0, true},
                        {"channel", Fp8ScaleKind::channel, 0, false},
                        {"block128", Fp8ScaleKind::block, 128, false},
                        {"block32", Fp8ScaleKind::block, 32, false}};
  for (const Kind& kd : kinds) {
    gemm_case(gemm, kd, 320, 272, {1, 5, 8, 33});     // n, k not multiples of 128
    gemm_case(gemm, kd, 640, 2304, {1, 4, 8, 40});     // k long enough for two warps per row pair
    gemm_case(gemm, kd, 1536, 1024, {2, 7, 130, 160});  // m not a multiple of 4 (block scales' layout)
  }
  for (const Kind& kd : kinds) gemm_case(gemm, kd, 200, 512, {1, 3, 8});  // n not a multiple of 16, k of 64
  gemv_rms_case(gemm, 272, 2048, 1);
  gemv_rms_case(gemm, 200, 1024, 3);
  gemv_rms_case(gemm, 200, 1040, 2);  // k not a multiple of 64: the SIMT kernel
  for (int64_t m : {1, 5, 8}) {
    gemv_f16_case(200, 1024, m, 0);
    gemv_f16_case(130, 768, m, 128);
    gemv_f16_case(96, 1040, m, 0);
  }
}

// tiny-llama's projections quantized per channel on the host; the CPU model runs the dequantized weights.
void tiny_model() {
  const std::string dir = check::repo_root + "/test/fixtures/models/tiny-llama";
  const ModelConfig config = load_model_config(dir);
  const ParallelLayout layout = make_parallel_layout(config, ShardInfo{});
  const DecoderSpec spec = llama_spec(config);
  LoadOptions lo = cudatest::options(Device::cuda);
  Checkpoint ck(dir);
  WeightReader reader(ck, lo);
  DecoderWeights w = read_llama_weights(config, reader, layout);
  auto quant = [](Linear& l) {
    l.fp8 = quantize_per_channel(l.w.data(), l.out, l.in);
    l.w = dequantize(l.fp8);
  };
  for (DecoderLayerWeights& lw : w.layers) {
    quant(lw.qkv);
    quant(lw.o);
    quant(lw.up);
    quant(lw.down);
  }
  DecoderWeights w_cpu = w;
  for (DecoderLayerWeights& lw : w_cpu.layers)
    for (Linear* l : {&lw.qkv, &lw.o, &lw.up, &lw.down}) l->fp8 = Fp8Matrix();
  auto cpu = std::make_unique<DecoderModel>(config, spec, std::move(w_cpu), 1);
  // The same weights with the activations quantized by a separate pass (TRTLLM_FP8_FUSE_QUANT=0): the norm and
  // gated-activation kernels that quantize their own outputs must give the very same logits.
  setenv("TRTLLM_FP8_FUSE_QUANT", "0", 1);
  auto unfused = make_cuda_model(config, spec, w, layout, lo);
  unsetenv("TRTLLM_FP8_FUSE_QUANT");
  auto gpu_model = make_cuda_model(config, spec, std::move(w), layout, lo);
  auto* gpu = dynamic_cast<cuda::CudaDecoder*>(gpu_model.get());
  CHECK(gpu != nullptr && gpu->fp8());
  const int32_t V = config.vocab_size;
  cpu->allocate_kv(32, 16);
  gpu->allocate_kv(32, 16);
  std::vector<int32_t> blocks(32);
  for (int32_t i = 0; i < 32; ++i) blocks[i] = (i * 7 + 3) % 32;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % V);
  const int32_t n = static_cast<int32_t>(prompt.size());
  ForwardOutput oc, o16, o8;
  cpu->forward({{prompt, 0, blocks, true}}, oc);
  gpu->gemm().set_fp8_activations(false);
  gpu->forward({{prompt, 0, blocks, true}}, o16);
  gpu->gemm().set_fp8_activations(true);
  gpu->forward({{prompt, 0, blocks, true}}, o8);
  {
    ForwardOutput ou;
    unfused->allocate_kv(32, 16);
    unfused->forward({{prompt, 0, blocks, true}}, ou);
    CHECK_MSG(ou.logits == o8.logits, "W8A8 logits with the quantization fused into the norm / activation differ from "
                                      "a separate pass's");
    std::printf("tiny-llama fp8 W8A8: activations quantized inside the norm / gated activation kernels give the same "
                "%zu logits as a separate quantize pass: %s\n", ou.logits.size(), ou.logits == o8.logits ? "yes" : "NO");
  }
  const size_t total = oc.logits.size();
  CHECK(o16.logits.size() == total && o8.logits.size() == total);
  const double e16 = rel_err(o16.logits.data(), oc.logits.data(), total);
  const double e8 = rel_err(o8.logits.data(), oc.logits.data(), total);
  const double a16 = cudatest::max_abs_err(o16.logits.data(), oc.logits.data(), total);
  const double a8 = cudatest::max_abs_err(o8.logits.data(), oc.logits.data(), total);
  std::printf("tiny-llama fp8 (per channel): context logits vs the CPU model on the dequantized weights: W8A16 rel "
              "err %.3g (max abs %.3g); with activations quantized per token (W8A8, cuBLASLt: %s) rel err %.3g (max "
              "abs %.3g)\n",
              e16, a16, gpu->gemm().last_fp8_path(), e8, a8);
  CHECK_MSG(e16 < 1e-2, "W8A16 context logits rel err %g", e16);
  CHECK_MSG(e8 < 0.1, "W8A8 context logits rel err %g", e8);
  // Top-1 of every context row wherever the CPU's margin exceeds twice the path's largest logit error.
  int judged16 = 0, judged8 = 0, agree16 = 0, agree8 = 0;
  for (int32_t r = 0; r < n; ++r) {
    const float* c = oc.logits.data() + static_cast<size_t>(r) * V;
    const double margin = cudatest::top1_margin(c, V);
    const int32_t want = cudatest::argmax(c, V);
    if (margin > 2 * a16) {
      ++judged16;
      agree16 += cudatest::argmax(o16.logits.data() + static_cast<size_t>(r) * V, V) == want;
    }
    if (margin > 2 * a8) {
      ++judged8;
      agree8 += cudatest::argmax(o8.logits.data() + static_cast<size_t>(r) * V, V) == want;
    }
  }
  CHECK(agree16 == judged16 && agree8 == judged8);
  // Greedy decode (batch 1: the FP8 GEMV with the fused norm, argmax on the device), teacher-forced on the CPU
  // model's tokens: equal wherever the CPU's margin is clear of the W8A16 error.
  int32_t tok = cudatest::argmax(oc.logits.data() + static_cast<size_t>(n - 1) * V, V);
  int clear = 0, equal_clear = 0, equal_all = 0;
  const int steps = 32;
  for (int32_t step = 0; step < steps; ++step) {
    ForwardOutput c1, g1;
    cpu->forward({{{tok}, n + step, blocks, false}}, c1);
    SequenceChunk ch{{tok}, n + step, blocks, false};
    ch.sample_on = SampleOn::device_argmax;
    gpu->forward({ch}, g1);
    const int32_t want = cudatest::argmax(c1.logits.data(), V), got = g1.sampled[0].token;
    equal_all += got == want;
    if (cudatest::top1_margin(c1.logits.data(), V) > 2 * a16) {
      ++clear;
      equal_clear += got == want;
    }
    tok = want;
  }
  CHECK_MSG(equal_clear == clear, "greedy: %d of %d clear steps equal", equal_clear, clear);
  std::printf("tiny-llama fp8: context top-1 equal on %d/%d clear rows (W8A16) and %d/%d (W8A8); greedy decode "
              "(teacher-forced, %d steps): %d/%d equal at a clear margin, %d/%d in all\n",
              agree16, judged16, agree8, judged8, steps, equal_clear, clear, equal_all, steps);
  CHECK(gpu->weight_bytes() < cpu->weight_bytes());
}

void bad_inputs() {
  LoadOptions lo = cudatest::options(Device::cuda);
  lo.quantization = "int4";
  CHECK_THROWS(load_model(check::repo_root + "/test/fixtures/models/tiny-llama", lo), "quantization");
  Fp8Matrix m = quantize_per_channel(random_weight(4, 32, 1).data(), 4, 32);
  m.scales.pop_back();
  cuda::DFp8 d;
  CHECK_THROWS(cuda::upload_fp8(m, d, g_stream), "per-channel scales: 3 values for 4 rows");
  m.scale_kind = Fp8ScaleKind::block;
  m.block = 16;
  CHECK_THROWS(cuda::upload_fp8(m, d, g_stream), "block scales");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) check::repo_root = argv[1];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!cuda_backend_built() || cuda_device_count() == 0)
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  cuda::check_cuda(cudaStreamCreate(&g_stream), "cudaStreamCreate");
  try {
    quantization_kernel_matches_host();
    fused_quantization_matches_separate();
    gemm_against_reference();
    tiny_model();
    bad_inputs();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda-fp8: %s\n", e.what());
    ++check::failures;
  }
  std::printf("%d checks passed, %d failed\n", check::passes, check::failures);
  return check::failures == 0 ? 0 : 1;
}
