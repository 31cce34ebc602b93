#include "loading/checkpoint.h"
#include "quant/fp8-matrix.h"

#include <sys/stat.h>

#include <cstring>
#include <map>

#include "errors.h"
#include "loading/json.h"

namespace engine {

namespace {
bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void convert(const TensorInfo& t, int64_t first, int64_t count, float* out) {
  const uint8_t* p = t.data;
  switch (t.dtype) {
    case DType::f32:
      std::memcpy(out, p + first * 4, static_cast<size_t>(count) * 4);
      return;
    case DType::f16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (first + i) * 2, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case DType::bf16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (first + i) * 2, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case DType::f8_e4m3:  // the stored e4m3 values, unscaled
      for (int64_t i = 0; i < count; ++i) out[i] = decode_e4m3(p[first + i]);
      return;
    default:
      break;
  }
}
}  // namespace

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (file_exists(single)) {
    source_ = single;
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& t : files_.back()->tensors()) tensors_[t.name] = &t;
    return;
  }
  if (!file_exists(index))
    throw EngineError(ErrorCode::not_found, "no weights in " + dir + ": neither model.safetensors nor " +
                                                "model.safetensors.index.json exists");
  source_ = index;
  json::Value doc = json::parse_file(index);
  const json::Value* map = doc.find("weight_map");
  if (!map) throw EngineError(ErrorCode::bad_checkpoint, index + " lacks \"weight_map\"");
  std::map<std::string, SafetensorsFile*> shards;
  for (const auto& [name, file_v] : map->as_object(index + " weight_map")) {
    const std::string& file = file_v.as_string(index + " weight_map['" + name + "']");
    if (file.find('/') != std::string::npos || file == "..")
      throw EngineError(ErrorCode::bad_checkpoint, index + " names shard '" + file + "' outside the directory");
    auto it = shards.find(file);
    if (it == shards.end()) {
      const std::string path = dir + "/" + file;
      if (!file_exists(path))
        throw EngineError(ErrorCode::not_found, index + " names shard " + file + " (for tensor '" + name +
                                                    "') but " + path + " does not exist");
      files_.push_back(std::make_unique<SafetensorsFile>(path));
      it = shards.emplace(file, files_.back().get()).first;
    }
    const TensorInfo* t = it->second->find(name);
    if (!t)
      throw EngineError(ErrorCode::not_found, "tensor '" + name + "' is mapped to " + file + " by " + index +
                                                  " but that shard does not contain it");
    tensors_[name] = t;
  }
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& kv : tensors_) n += kv.second->nbytes;
  return n;
}

bool Checkpoint::has(const std::string& name) const { return tensors_.count(name) != 0; }

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw EngineError(ErrorCode::not_found, "tensor '" + name + "' not found in " + source_);
  return *it->second;
}

std::vector<float> Checkpoint::read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                                        const std::optional<TensorSlice>& slice) const {
  int64_t n = 1;
  for (size_t d = 0; d < expected_shape.size(); ++d)
    n *= (slice && static_cast<size_t>(slice->dim) == d) ? slice->end - slice->begin : expected_shape[d];
  std::vector<float> out(static_cast<size_t>(n < 0 ? 0 : n));
  read_f32_into(name, expected_shape, out.data(), slice);
  return out;
}

void Checkpoint::read_f32_into(const std::string& name, const std::vector<int64_t>& expected_shape, float* out,
                               const std::optional<TensorSlice>& slice) const {
  const TensorInfo& t = info(name);
  if (t.shape != expected_shape)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + name + "' has shape " + shape_to_string(t.shape) +
                                                     ", expected " + shape_to_string(expected_shape) + " (in " +
                                                     source_ + ")");
  if (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16 && t.dtype != DType::f8_e4m3)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + name + "' has dtype " + t.dtype_name +
                                                     ", which is not supported (F32, F16, BF16, F8_E4M3)");
  if (!slice) {
    convert(t, 0, t.numel(), out);
    return;
  }
  const int32_t dim = slice->dim;
  if (dim < 0 || static_cast<size_t>(dim) >= t.shape.size() || slice->begin < 0 || slice->end < slice->begin ||
      slice->end > t.shape[dim])
    throw EngineError(ErrorCode::internal, "slice [" + std::to_string(slice->begin) + ", " +
                                               std::to_string(slice->end) + ") of dim " + std::to_string(dim) +
                                               " is outside tensor '" + name + "' of shape " +
                                               shape_to_string(t.shape));
  // View the tensor as [outer, shape[dim], inner]: the slice is `outer` contiguous runs of (end-begin)*inner.
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < dim; ++d) outer *= t.shape[d];
  for (size_t d = dim + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  const int64_t run = (slice->end - slice->begin) * inner;
  for (int64_t o = 0; o < outer; ++o)
    convert(t, (o * t.shape[dim] + slice->begin) * inner, run, out + o * run);
}

}  // namespace engine
