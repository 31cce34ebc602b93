// FP8 weights of a checkpoint read with their scales (quant-config.h says how they are stored): dequantized into
// floats for the CPU backend and any slice, or as an Fp8Matrix (e4m3 bytes + scales) for backends that run FP8, where
// the slice keeps whole scale blocks. A tensor is FP8 when its dtype is F8_E4M3.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loading/checkpoint.h"
#include "quant/fp8-matrix.h"
#include "quant/quant-config.h"

namespace engine {

class Fp8Tensors {
 public:
  Fp8Tensors(const Checkpoint& checkpoint, QuantConfig config) : checkpoint_(checkpoint), config_(std::move(config)) {}

  // True when `name` (a "<module>.weight") is stored as F8_E4M3; throws bad_checkpoint naming it when the checkpoint
  // says nothing about quantization, or when it is not a 2-D weight.
  bool is_fp8(const std::string& name) const;
  // The weight (or `slice` of it) as floats: e4m3 value times its scale, exactly (fp32 products).
  void dequantize_into(const std::string& name, const std::vector<int64_t>& shape, float* out,
                       const std::optional<TensorSlice>& slice) const;
  // The same region as an Fp8Matrix; nullopt when block scales do not fall on the slice's edges.
  std::optional<Fp8Matrix> matrix(const std::string& name, const std::vector<int64_t>& shape,
                                   const std::optional<TensorSlice>& slice) const;
  // The scale tensors that belong to `name` (counted by load progress).
  std::vector<std::string> companions(const std::string& name) const;

 private:
  struct Scales {
    Fp8ScaleKind kind = Fp8ScaleKind::tensor;
    int32_t b0 = 0, b1 = 0;
    int64_t block_cols = 0;
    std::vector<float> v;
    float input_scale = 1.0f;
    float at(int64_t r, int64_t c) const;
  };
  Scales scales(const std::string& name, int64_t rows, int64_t cols) const;

  const Checkpoint& checkpoint_;
  QuantConfig config_;
};

// Stacks the row blocks of a fused projection (q/k/v, gate/up) into one matrix: tensor and channel scales become
// channel scales (exact), block scales stay when every part but the last has whole blocks of rows. nullopt when a
// part is missing or they cannot be combined (the backend then runs the dequantized weight).
std::optional<Fp8Matrix> fuse_rows(const std::vector<std::optional<Fp8Matrix>>& parts);

}  // namespace engine
