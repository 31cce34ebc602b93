#include "loading/weight-reader.h"

#include <algorithm>
#include <utility>

namespace engine {

WeightReader::WeightReader(const Checkpoint& checkpoint, const LoadOptions& options, QuantConfig quant)
    : checkpoint_(checkpoint),
      fp8_(checkpoint, std::move(quant)),
      shard_(options.shard),
      progress_(options.progress),
      progress_user_(options.progress_user) {
  total_ = checkpoint.total_bytes();
  if (progress_) progress_(progress_user_, 0, total_);
}

void WeightReader::advance(const std::string& name) {
  // A fused tensor (Phi-3's qkv_proj) is read in parts: its bytes count once.
  if (!counted_.insert(name).second) return;
  done_ += checkpoint_.info(name).nbytes;
  if (checkpoint_.info(name).dtype == DType::f8_e4m3)
    for (const std::string& c : fp8_.companions(name)) done_ += checkpoint_.info(c).nbytes;
  if (done_ > total_) done_ = total_;
  if (progress_) progress_(progress_user_, done_, total_);
}

std::vector<float> WeightReader::read(const std::string& name, const std::vector<int64_t>& shape,
                                      const std::optional<TensorSlice>& slice) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    n *= (slice && static_cast<size_t>(slice->dim) == d) ? slice->end - slice->begin : shape[d];
  std::vector<float> v(static_cast<size_t>(n < 0 ? 0 : n));
  read_into(name, shape, v.data(), slice);
  return v;
}

void WeightReader::read_into(const std::string& name, const std::vector<int64_t>& shape, float* out,
                             const std::optional<TensorSlice>& slice) {
  if (fp8_.is_fp8(name)) fp8_.dequantize_into(name, shape, out, slice);
  else checkpoint_.read_f32_into(name, shape, out, slice);
  advance(name);
}

Fp8Matrix WeightReader::fp8_rows(const std::vector<Part>& parts) const {
  std::vector<std::optional<Fp8Matrix>> ms;
  for (const Part& p : parts) {
    if (!fp8_.is_fp8(p.name)) return {};
    ms.push_back(fp8_.matrix(p.name, p.shape, p.slice));
  }
  std::optional<Fp8Matrix> m = fuse_rows(ms);
  return m ? std::move(*m) : Fp8Matrix{};
}

std::vector<float> WeightReader::read_transposed(const std::string& name, int64_t full_in, int64_t full_out,
                                                 const std::optional<TensorSlice>& slice) {
  std::vector<float> src = read(name, {full_in, full_out}, slice);
  const int64_t in = slice && slice->dim == 0 ? slice->end - slice->begin : full_in;
  const int64_t out = slice && slice->dim == 1 ? slice->end - slice->begin : full_out;
  std::vector<float> t(src.size());
  constexpr int64_t kTile = 32;  // tiles keep both the reads and the writes cache-friendly
  for (int64_t i0 = 0; i0 < in; i0 += kTile)
    for (int64_t o0 = 0; o0 < out; o0 += kTile)
      for (int64_t i = i0; i < std::min(in, i0 + kTile); ++i)
        for (int64_t o = o0; o < std::min(out, o0 + kTile); ++o) t[o * in + i] = src[i * out + o];
  return t;
}

std::vector<float> WeightReader::read_rows_padded(const std::string& name, int64_t rows, int64_t cols, int64_t begin,
                                                  int64_t end) {
  std::vector<float> v(static_cast<size_t>((end - begin) * cols), 0.0f);
  const int64_t real_end = std::min(end, rows);
  if (real_end > begin) read_into(name, {rows, cols}, v.data(), TensorSlice{0, begin, real_end});
  return v;
}

void WeightReader::finish() {
  done_ = total_;
  if (progress_) progress_(progress_user_, done_, total_);
}

}  // namespace engine
