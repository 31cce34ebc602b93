// FP8 projection weights on the device: an Fp8Matrix (quant/fp8-matrix.h) uploaded as it is, or a weight already
// on the device in the model dtype quantized there per output channel (--quantization fp8, dummy weights).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device-buffer.h"
#include "cuda/kernels.h"
#include "quant/fp8-matrix.h"

namespace engine::cuda {

struct DFp8 {
  DeviceBuffer data;    // [n, k] e4m3fn
  DeviceBuffer scales;  // as Fp8Weight::scales
  int32_t block = 0;    // 0: per-row scales
  int64_t scale_ld = 0;
  Fp8Activation act = Fp8Activation::dynamic_token;
  float input_scale = 1.0f;

  bool on() const { return !data.empty(); }
  size_t bytes() const { return data.bytes() + scales.bytes(); }
  Fp8Weight view() const {
    return Fp8Weight{data.as<uint8_t>(), scales.as<float>(), scale_ld, block, act, input_scale};
  }
};

// `m` onto the device: a per-tensor scale becomes one per row, block scales get rows of scale_ld (ceil(k/block)
// rounded up to 4, cuBLASLt's layout). Throws EngineError naming what does not fit.
void upload_fp8(const Fp8Matrix& m, DFp8& dst, cudaStream_t s);
// w ([n, k], dtype dt, on the device) quantized per output row into dst (scale max|row| / 448, as
// quantize_per_channel does on the host), dynamic per-token activations.
void quantize_fp8(const void* w, DType dt, int64_t n, int64_t k, DFp8& dst, cudaStream_t s);

}  // namespace engine::cuda
