// A Hugging Face checkpoint directory: model.safetensors, or model.safetensors.index.json whose weight_map sends
// each tensor to a shard. Tensors come out as fp32 (f16/bf16 converted on the fly), shape-checked, optionally
// as a slice along one dimension so a tensor-parallel rank converts only its 1/tp of a weight.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "loading/safetensors.h"

namespace engine {

// Elements [begin, end) along dimension `dim` (0 = rows of a [out, in] weight, 1 = columns).
struct TensorSlice {
  int32_t dim = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

class Checkpoint {
 public:
  // Opens (maps) every shard. Throws not_found when neither model.safetensors nor the index exists, or when the
  // index names a missing shard; bad_checkpoint for malformed files.
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const;
  // The stored tensor; throws not_found naming the tensor and the file it was looked up in.
  const TensorInfo& info(const std::string& name) const;

  // The tensor as fp32, row-major. Checks the full stored shape against `expected_shape` first (bad_checkpoint:
  // "tensor 'x' has shape [64, 32], expected [64, 64]"). With `slice`, returns only that slice (shape: expected
  // with dim replaced by end - begin) and converts only those elements.
  std::vector<float> read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                              const std::optional<TensorSlice>& slice = std::nullopt) const;
  // Same, into caller memory of the slice's element count (lets a loader fill a fused weight in place).
  void read_f32_into(const std::string& name, const std::vector<int64_t>& expected_shape, float* out,
                     const std::optional<TensorSlice>& slice = std::nullopt) const;

  // Where a lookup happens, for messages: "<dir>/model.safetensors" or "<dir>/model.safetensors.index.json".
  const std::string& source() const { return source_; }
  // Stored bytes of all tensors in all shards (the denominator of load progress).
  uint64_t total_bytes() const;

 private:
  std::string dir_;
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorInfo*> tensors_;
};

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[64, 32]"

}  // namespace engine
