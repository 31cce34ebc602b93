// A memory-mapped .safetensors file: 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw data. Mapping (not reading) keeps loading a multi-GB shard cheap and
// lets a tensor-parallel rank touch only the bytes of its slice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace engine {

// f8_e4m3: FP8 weights, read raw (quant/fp8-checkpoint.h applies their scales). i64, boolean: index tensors read
// raw (EAGLE-3's d2t, t2d), never as weights.
enum class DType { f32, f16, bf16, f8_e4m3, i64, boolean, unsupported };

struct TensorInfo {
  std::string name;
  DType dtype = DType::unsupported;
  std::string dtype_name;        // as written in the header ("F32", "I64", ...), for messages
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr; // into the mapping; valid while the file object lives
  size_t nbytes = 0;             // bytes
  int64_t numel() const;
};

size_t dtype_size(DType dtype);  // bytes per element; 0 for unsupported

class SafetensorsFile {
 public:
  // Maps and validates the file. Throws EngineError(not_found) when it cannot be opened and
  // EngineError(bad_checkpoint) when it is truncated or its header is malformed, naming the file.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;  // bytes
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// Writes a safetensors file (used by tests and tools; tensors must be f32/f16/bf16 raw little-endian bytes).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

// Element conversions (exact for f16/bf16 -> f32; f32 -> f16/bf16 round to nearest even).
// A F32 / F16 / BF16 tensor's values as floats (exact). Any other dtype is EngineError(bad_checkpoint):
// "<file>: tensor '<name>' is <dtype>; <what> must be F32, F16 or BF16".
std::vector<float> tensor_as_f32(const TensorInfo& t, const std::string& file, const std::string& what);
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);

// Why `dir`'s weights, a pickle file `pickle` only, are not read, with the one-line conversion to `safetensors`
// (the name the reader looks for).
std::string pickle_refusal(const std::string& dir, const std::string& pickle, const std::string& safetensors);

}  // namespace engine
