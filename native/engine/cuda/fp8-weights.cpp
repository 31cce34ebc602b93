#include "cuda/fp8-weights.h"

#include <string>
#include <vector>

#include "errors.h"

namespace engine::cuda {

void upload_fp8(const Fp8Matrix& m, DFp8& dst, cudaStream_t s) {
  const int64_t n = m.rows, k = m.cols;
  if (m.data.size() != static_cast<size_t>(n * k))
    throw EngineError(ErrorCode::invalid_argument, "FP8 weight [" + std::to_string(n) + ", " + std::to_string(k) +
                                                       "] has " + std::to_string(m.data.size()) + " bytes");
  std::vector<float> scales;
  switch (m.scale_kind) {
    case Fp8ScaleKind::tensor:
      if (m.scales.size() != 1)
        throw EngineError(ErrorCode::invalid_argument,
                          "FP8 per-tensor scale: " + std::to_string(m.scales.size()) + " values, expected 1");
      scales.assign(static_cast<size_t>(n), m.scales[0]);
      dst.block = 0;
      dst.scale_ld = 0;
      break;
    case Fp8ScaleKind::channel:
      if (m.scales.size() != static_cast<size_t>(n))
        throw EngineError(ErrorCode::invalid_argument, "FP8 per-channel scales: " + std::to_string(m.scales.size()) +
                                                           " values for " + std::to_string(n) + " rows");
      scales = m.scales;
      dst.block = 0;
      dst.scale_ld = 0;
      break;
    case Fp8ScaleKind::block: {
      if (m.block <= 0) throw EngineError(ErrorCode::invalid_argument, "FP8 block size " + std::to_string(m.block));
      const int64_t br = (n + m.block - 1) / m.block, bc = (k + m.block - 1) / m.block;
      if (m.scales.size() != static_cast<size_t>(br * bc))
        throw EngineError(ErrorCode::invalid_argument, "FP8 block scales: " + std::to_string(m.scales.size()) +
                                                           " values for " + std::to_string(br) + " x " +
                                                           std::to_string(bc) + " blocks");
      const int64_t ld = (bc + 3) / 4 * 4;
      scales.assign(static_cast<size_t>(br * ld), 0.0f);
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < bc; ++c) scales[static_cast<size_t>(r * ld + c)] = m.scales[static_cast<size_t>(r * bc + c)];
      dst.block = m.block;
      dst.scale_ld = ld;
      break;
    }
  }
  dst.act = m.activation;
  dst.input_scale = m.input_scale;
  dst.data.reset(m.data.size());
  dst.scales.reset(scales.size() * sizeof(float));
  check_cuda(cudaMemcpyAsync(dst.data.get(), m.data.data(), m.data.size(), cudaMemcpyHostToDevice, s), "upload FP8 weight");
  check_cuda(cudaMemcpyAsync(dst.scales.get(), scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice, s),
             "upload FP8 scales");
  check_cuda(cudaStreamSynchronize(s), "upload FP8 weight");  // the host vectors go when this returns
}

void quantize_fp8(const void* w, DType dt, int64_t n, int64_t k, DFp8& dst, cudaStream_t s) {
  dst.data.reset(static_cast<size_t>(n * k));
  dst.scales.reset(static_cast<size_t>(n) * sizeof(float));
  dst.block = 0;
  dst.scale_ld = 0;
  dst.act = Fp8Activation::dynamic_token;
  dst.input_scale = 1.0f;
  quantize_e4m3(w, dt, n, k, Fp8Quant::row, 0, 1.0f, dst.data.as<uint8_t>(), dst.scales.as<float>(), 0, s);
}

}  // namespace engine::cuda
