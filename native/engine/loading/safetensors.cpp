#include "loading/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "errors.h"
#include "loading/json.h"

namespace engine {

namespace {
// Real headers are a few MB at most; a larger claim means a corrupt or foreign file, not a big checkpoint.
constexpr uint64_t kMaxHeaderBytes = 256ull << 20;

DType parse_dtype(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "F8_E4M3") return DType::f8_e4m3;
  if (s == "I64") return DType::i64;
  if (s == "BOOL") return DType::boolean;
  return DType::unsupported;
}

// Element sizes of dtypes we do not compute with, so their byte ranges can still be validated.
size_t any_dtype_size(const std::string& s) {
  if (s == "F64" || s == "I64" || s == "U64") return 8;
  if (s == "F32" || s == "I32" || s == "U32") return 4;
  if (s == "F16" || s == "BF16" || s == "I16" || s == "U16") return 2;
  if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
  return 0;
}

const char* dtype_label(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f8_e4m3: return "F8_E4M3";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
    default: return "?";
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f8_e4m3: return 1;
    case DType::i64: return 8;
    case DType::boolean: return 1;
    default: return 0;
  }
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw EngineError(ErrorCode::not_found, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw EngineError(ErrorCode::not_found, "cannot stat " + path + ": " + std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  const std::string file_name = path;
  if (size_ < 8) {
    ::close(fd);
    throw EngineError(ErrorCode::bad_checkpoint, file_name + " is truncated: it has " + std::to_string(size_) +
                                                     " bytes, fewer than the 8-byte header length");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw EngineError(ErrorCode::bad_checkpoint, "cannot mmap " + path + ": " + std::strerror(errno));
  }
  try {
    const uint8_t* base = static_cast<const uint8_t*>(map_);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
    if (header_len > kMaxHeaderBytes || 8 + header_len > size_) {
      throw EngineError(ErrorCode::bad_checkpoint,
                        file_name + " is truncated: the header needs bytes [8, " + std::to_string(8 + header_len) +
                            ") but the file has " + std::to_string(size_) + " bytes");
    }
    json::Value header = json::parse(
        std::string_view(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(header_len)),
        path + " (header)");
    const size_t data_start = 8 + static_cast<size_t>(header_len);
    const size_t data_size = size_ - data_start;
    for (const auto& [name, entry] : header.as_object(path + " header")) {
      if (name == "__metadata__") continue;
      const std::string what = path + ": tensor '" + name + "'";
      TensorInfo t;
      t.name = name;
      const json::Value* dt = entry.find("dtype");
      const json::Value* shape = entry.find("shape");
      const json::Value* offsets = entry.find("data_offsets");
      if (!dt || !shape || !offsets)
        throw EngineError(ErrorCode::bad_checkpoint, what + " lacks dtype, shape or data_offsets");
      t.dtype_name = dt->as_string(what + " dtype");
      t.dtype = parse_dtype(t.dtype_name);
      size_t elem = any_dtype_size(t.dtype_name);
      if (elem == 0)
        throw EngineError(ErrorCode::bad_checkpoint,
                          what + " has unknown dtype '" + t.dtype_name + "'; supported: F32, F16, BF16");
      for (const auto& d : shape->as_array(what + " shape")) {
        int64_t v = d.as_int64(what + " shape");
        if (v < 0) throw EngineError(ErrorCode::bad_checkpoint, what + " has a negative dimension");
        t.shape.push_back(v);
      }
      const auto& off = offsets->as_array(what + " data_offsets");
      if (off.size() != 2) throw EngineError(ErrorCode::bad_checkpoint, what + " data_offsets must have 2 entries");
      int64_t begin = off[0].as_int64(what + " data_offsets");
      int64_t end = off[1].as_int64(what + " data_offsets");
      if (begin < 0 || end < begin)
        throw EngineError(ErrorCode::bad_checkpoint, what + " has invalid data_offsets [" + std::to_string(begin) +
                                                         ", " + std::to_string(end) + ")");
      if (static_cast<uint64_t>(end) > data_size) {
        throw EngineError(ErrorCode::bad_checkpoint,
                          file_name + " is truncated: tensor '" + name + "' needs bytes [" +
                              std::to_string(data_start + begin) + ", " + std::to_string(data_start + end) +
                              ") but the file has " + std::to_string(size_) + " bytes");
      }
      t.nbytes = static_cast<size_t>(end - begin);
      if (static_cast<uint64_t>(t.numel()) * elem != t.nbytes)
        throw EngineError(ErrorCode::bad_checkpoint,
                          what + " of shape " + shape_str(t.shape) + " and dtype " + t.dtype_name + " needs " +
                              std::to_string(t.numel() * elem) + " bytes but its data_offsets span " +
                              std::to_string(t.nbytes));
      t.data = base + data_start + begin;
      index_.emplace(name, tensors_.size());
      tensors_.push_back(std::move(t));
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    header += (i ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + dtype_label(t.dtype) +
              "\",\"shape\":" + shape_str(t.shape) + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  header += "}";
  // The format pads the header with spaces so the data starts 8-byte aligned.
  while ((8 + header.size()) % 8 != 0) header += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw EngineError(ErrorCode::not_found, "cannot write " + path);
  uint64_t n = header.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  if (!out) throw EngineError(ErrorCode::internal, "failed writing " + path);
}

std::vector<float> tensor_as_f32(const TensorInfo& t, const std::string& file, const std::string& what) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  if (t.dtype == DType::f32) {
    std::memcpy(out.data(), t.data, n * sizeof(float));
  } else if (t.dtype == DType::f16 || t.dtype == DType::bf16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  } else {
    throw EngineError(ErrorCode::bad_checkpoint,
                      file + ": tensor '" + t.name + "' is " + t.dtype_name + "; " + what + " must be F32, F16 or BF16");
  }
  return out;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize into an f32 normal
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
      mant &= 0x3FF;
      bits = sign | ((127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00;          // NaN
  if (abs >= 0x477FF000u) return sign | 0x7C00;         // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                              // below the smallest f16 normal: subnormal or zero
    if (abs < 0x33000000u) return sign;                 // < half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - exp;                         // value / 2^-24 == mant * 2^(exp - 126)
    uint32_t v = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return sign | static_cast<uint16_t>(v);
  }
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  uint32_t rem = v & 0x1FFF;
  v >>= 13;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) ++v;
  return sign | static_cast<uint16_t>(v);
}

std::string pickle_refusal(const std::string& dir, const std::string& pickle, const std::string& safetensors) {
  return dir + " has only " + pickle + ", a pickle, and pickles are not read; convert it once with python -c \"import "
         "torch; from safetensors.torch import save_file; save_file(torch.load('" + pickle +
         "', map_location='cpu'), '" + safetensors + "')\"";
}

}  // namespace engine
