// safetensors files and checkpoints: round trips in f32/f16/bf16, truncation and header errors, sharded
// checkpoints through model.safetensors.index.json, shape checks and row/column slices.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "check.h"
#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/safetensors.h"
#include "temp-dir.h"

using namespace engine;

static std::string tmp_dir() {
  return test::make_temp_dir("model-safetensors");
}

static TensorToWrite tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  TensorToWrite t{name, dtype, std::move(shape), {}};
  for (float f : values) {
    if (dtype == DType::f32) {
      uint8_t b[4];
      std::memcpy(b, &f, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      uint16_t h = dtype == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      t.bytes.push_back(static_cast<uint8_t>(h));
      t.bytes.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return t;
}

static void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out << std::string(data_bytes, '\0');
}

static void conversions() {
  CHECK(f16_to_f32(0x3C00) == 1.0f);
  CHECK(f16_to_f32(0xC000) == -2.0f);
  CHECK(f16_to_f32(0x0001) == 5.9604644775390625e-08f);  // smallest subnormal
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(std::isinf(f16_to_f32(0x7C00)));
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);
  CHECK(f32_to_f16(5.9604644775390625e-08f) == 0x0001);
  CHECK(f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);  // tie rounds to even
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive f16 survives the round trip
    if (f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))) != h) {
      CHECK_MSG(false, "f16 round trip of 0x%04x", h);
      break;
    }
  }
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(bf16_to_f32(f32_to_bf16(3.140625f)) == 3.140625f);
}

static void round_trip(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  std::vector<float> a = {1, -2, 3.5, 0.25, -0.125, 100};
  write_safetensors(path, {tensor("a32", DType::f32, {2, 3}, a), tensor("a16", DType::f16, {3, 2}, a),
                           tensor("abf", DType::bf16, {6}, a)});
  SafetensorsFile f(path);
  CHECK(f.tensors().size() == 3);
  const TensorInfo* t = f.find("a16");
  CHECK(t && t->dtype == DType::f16 && t->shape == std::vector<int64_t>({3, 2}) && t->nbytes == 12);
  CHECK(f.find("nope") == nullptr);

  Checkpoint ck(dir);
  CHECK(ck.read_f32("a32", {2, 3}) == a);
  CHECK(ck.read_f32("a16", {3, 2}) == a);
  CHECK(ck.read_f32("abf", {6}) == a);
  // rows [1, 2) of [2, 3]; columns [1, 3) of [2, 3]
  CHECK(ck.read_f32("a32", {2, 3}, TensorSlice{0, 1, 2}) == std::vector<float>({0.25f, -0.125f, 100}));
  CHECK(ck.read_f32("a32", {2, 3}, TensorSlice{1, 1, 3}) == std::vector<float>({-2, 3.5f, -0.125f, 100}));
  CHECK(ck.read_f32("a16", {3, 2}, TensorSlice{1, 0, 1}) == std::vector<float>({1, 3.5f, -0.125f}));
  CHECK_THROWS(ck.read_f32("a32", {3, 2}), "tensor 'a32' has shape [2, 3], expected [3, 2]");
  CHECK_THROWS(ck.read_f32("missing.weight", {1}), ("tensor 'missing.weight' not found in " + path).c_str());
  try {
    ck.read_f32("missing.weight", {1});
  } catch (const EngineError& e) {
    CHECK(e.code() == ErrorCode::not_found);
  }
}

static void errors(const std::string& dir) {
  const std::string p = dir + "/bad.safetensors";
  { std::ofstream(p, std::ios::binary) << "abc"; }
  CHECK_THROWS(SafetensorsFile{p}, "is truncated: it has 3 bytes");
  write_raw(p, "{}", 0);
  { SafetensorsFile ok(p); CHECK(ok.tensors().empty()); }
  {  // header length claims more than the file holds
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  CHECK_THROWS(SafetensorsFile{p}, "is truncated: the header needs bytes [8, 1008) but the file has 10 bytes");
  const std::string hdr = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  write_raw(p, hdr, 8);
  const std::string truncated = "is truncated: tensor 'w' needs bytes [" + std::to_string(8 + hdr.size()) + ", " +
                                std::to_string(8 + hdr.size() + 16) + ") but the file has " +
                                std::to_string(8 + hdr.size() + 8) + " bytes";
  CHECK_THROWS(SafetensorsFile{p}, truncated.c_str());
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16);
  CHECK_THROWS(SafetensorsFile{p}, "needs 16 bytes but its data_offsets span 12");
  write_raw(p, R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,1]}})", 1);
  CHECK_THROWS(SafetensorsFile{p}, "tensor 'w' has unknown dtype 'Q4'");
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8);  // missing brace
  CHECK_THROWS(SafetensorsFile{p}, "invalid JSON at byte");
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2]}})", 8);
  CHECK_THROWS(SafetensorsFile{p}, "tensor 'w' lacks dtype, shape or data_offsets");
  CHECK_THROWS(SafetensorsFile{dir + "/absent.safetensors"}, ("cannot open " + dir + "/absent.safetensors").c_str());

  // A valid but unsupported dtype is fine to carry, and an error only when read.
  const std::string d2 = dir + "/i64";
  mkdir(d2.c_str(), 0755);
  write_raw(d2 + "/model.safetensors", R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16);
  Checkpoint ck(d2);
  CHECK_THROWS(ck.read_f32("ids", {2}), "tensor 'ids' has dtype I64, which is not supported");
  CHECK_THROWS(Checkpoint{dir + "/nothing-here"}, "neither model.safetensors nor model.safetensors.index.json");
}

static void sharded(const std::string& root) {
  const std::string dir = root + "/sharded";
  mkdir(dir.c_str(), 0755);
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {tensor("x", DType::bf16, {2}, {1, 2})});
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {tensor("y", DType::f32, {1}, {7})});
  {
    std::ofstream(dir + "/model.safetensors.index.json")
        << R"({"metadata":{"total_size":8},"weight_map":{"x":"model-00001-of-00002.safetensors",)"
        << R"("y":"model-00002-of-00002.safetensors"}})";
  }
  Checkpoint ck(dir);
  CHECK(ck.read_f32("x", {2}) == std::vector<float>({1, 2}));
  CHECK(ck.read_f32("y", {1}) == std::vector<float>({7}));
  CHECK(ck.total_bytes() == 8);
  CHECK_THROWS(ck.read_f32("z", {1}), ("tensor 'z' not found in " + dir + "/model.safetensors.index.json").c_str());
  {
    std::ofstream(dir + "/model.safetensors.index.json")
        << R"({"weight_map":{"x":"model-00001-of-00002.safetensors","q":"model-00003-of-00002.safetensors"}})";
  }
  CHECK_THROWS(Checkpoint{dir}, "model-00003-of-00002.safetensors does not exist");
  {
    std::ofstream(dir + "/model.safetensors.index.json")
        << R"({"weight_map":{"y":"model-00001-of-00002.safetensors"}})";
  }
  CHECK_THROWS(Checkpoint{dir}, "tensor 'y' is mapped to model-00001-of-00002.safetensors");
}

TEST_MAIN({
  const std::string dir = tmp_dir();
  conversions();
  round_trip(dir);
  errors(dir);
  sharded(dir);
})
