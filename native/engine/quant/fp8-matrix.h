// An FP8 (e4m3fn) weight matrix with its scales: how every FP8 source (a Hugging Face "fp8" block checkpoint,
// compressed-tensors float-quantized, ModelOpt FP8, or a bf16 checkpoint quantized at load by --quantization fp8)
// reaches a backend. The value of element (r, c) is decode_e4m3(data[r * cols + c]) * scale_of(r, c). Backends
// that run FP8 (CUDA) upload `data` and `scales`; the CPU backend runs the dequantized matrix (W8A16), which is
// the same numbers.
#pragma once
#include <cstdint>
#include <vector>

namespace engine {

enum class Fp8ScaleKind : uint8_t {
  tensor,   // one scale for the whole matrix (ModelOpt, compressed-tensors strategy "tensor")
  channel,  // one per output row (compressed-tensors strategy "channel", --quantization fp8)
  block,    // one per block x block tile, row-major over ceil(rows/block) x ceil(cols/block) (HF "fp8" block format)
};

// How activations entering an FP8 matrix are quantized on backends that run FP8 GEMMs.
enum class Fp8Activation : uint8_t {
  dynamic_token,        // per token (row), computed at run time (compressed-tensors dynamic, --quantization fp8)
  dynamic_token_group,  // per token and group of `block` columns (HF "fp8" block format: activation_scheme dynamic)
  static_tensor,        // one stored input_scale (ModelOpt, compressed-tensors static)
};

struct Fp8Matrix {
  int64_t rows = 0, cols = 0;     // [out, in], nn.Linear's layout
  std::vector<uint8_t> data;      // rows * cols e4m3fn bytes
  Fp8ScaleKind scale_kind = Fp8ScaleKind::channel;
  int32_t block = 128;            // for Fp8ScaleKind::block
  std::vector<float> scales;      // 1 | rows | ceil(rows/block) * ceil(cols/block); multiply to dequantize
  Fp8Activation activation = Fp8Activation::dynamic_token;
  float input_scale = 1.0f;       // for Fp8Activation::static_tensor

  bool empty() const { return data.empty(); }
};

// e4m3fn (no infinities, one NaN pattern per sign, max 448) to float, exactly.
float decode_e4m3(uint8_t v);
// Round-to-nearest-even float to e4m3fn, saturating at +-448 (what torch's .to(torch.float8_e4m3fn) gives for
// values within range; out-of-range values saturate instead of becoming NaN).
uint8_t encode_e4m3(float v);

// The matrix as float, row-major [rows, cols].
std::vector<float> dequantize(const Fp8Matrix& m);
// Per-output-row quantization of a float matrix: scale = max|row| / 448 (1 for an all-zero row), as vLLM's and
// TensorRT-LLM's per-channel FP8 does.
Fp8Matrix quantize_per_channel(const float* w, int64_t rows, int64_t cols);

}  // namespace engine
