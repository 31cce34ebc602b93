// Reads a model's weights from a Checkpoint for one rank, reporting progress. Loaders ask for every tensor
// through here (sliced per parallel-layout.h) so that conversion and progress accounting live in one place.
// Progress counts a tensor's stored bytes once it is read, whole or in part; ranks of a pipeline stage skip other
// stages' tensors, and finish() then completes the count.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "loading/checkpoint.h"
#include "model/model.h"
#include "quant/fp8-checkpoint.h"

namespace engine {

class WeightReader {
 public:
  // `quant`: how the checkpoint's FP8 tensors store their scales (ModelConfig::quant).
  WeightReader(const Checkpoint& checkpoint, const LoadOptions& options, QuantConfig quant = {});

  bool has(const std::string& name) const { return checkpoint_.has(name); }
  // Whole tensor (or a slice) as fp32, shape-checked; counts its stored bytes toward progress. FP8 weights come
  // back dequantized (e4m3 value times scale).
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape,
                          const std::optional<TensorSlice>& slice = std::nullopt);
  // Into `out` (slice element count), to assemble fused weights without a copy.
  void read_into(const std::string& name, const std::vector<int64_t>& shape, float* out,
                 const std::optional<TensorSlice>& slice = std::nullopt);
  // A GPT-2 Conv1D weight stored [in, out], returned transposed to nn.Linear's [out, in]. With `slice` on dim 1
  // (output columns: column parallel) or dim 0 (input rows: row parallel), only that part, still transposed.
  std::vector<float> read_transposed(const std::string& name, int64_t in, int64_t out,
                                     const std::optional<TensorSlice>& slice = std::nullopt);
  // Rows [begin, end) of a [rows, cols] tensor, where rows >= `rows` (a vocab padded up to a multiple of tp) come
  // back as zeros. For the vocab-parallel embedding and LM head.
  std::vector<float> read_rows_padded(const std::string& name, int64_t rows, int64_t cols, int64_t begin,
                                      int64_t end);
  // The FP8 form of one or more row blocks of projections ({name, full shape, slice} each, stacked as a fused
  // projection stacks them): set when every part is FP8 and their scales can be combined; empty otherwise.
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
    std::optional<TensorSlice> slice;
  };
  Fp8Matrix fp8_rows(const std::vector<Part>& parts) const;

  // Reports completion (tensors the model does not use, like GPT-2's attn.bias buffers, count as done).
  void finish();

  const ShardInfo& shard() const { return shard_; }

 private:
  void advance(const std::string& name);

  const Checkpoint& checkpoint_;
  Fp8Tensors fp8_;
  ShardInfo shard_;
  void (*progress_)(void*, uint64_t, uint64_t);
  void* progress_user_;
  uint64_t done_ = 0, total_ = 0;  // bytes
  std::unordered_set<std::string> counted_;  // tensors whose bytes are in done_
};

}  // namespace engine
