#include "medusa/medusa-checkpoint.h"

#include <filesystem>
#include <map>

#include "errors.h"
#include "loading/json.h"
#include "loading/safetensors.h"

namespace engine {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& message) { throw EngineError(code, "Medusa heads: " + message); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t positive_int(const json::Value& doc, const char* key, int64_t fallback, const std::string& path) {
  const json::Value* v = doc.find(key);
  if (v == nullptr || v->is_null()) {
    if (fallback > 0) return fallback;
    fail(ErrorCode::bad_checkpoint, path + " has no '" + key + "'; a Medusa config names how many heads it has");
  }
  const int64_t n = v->as_int64(path + " " + key);
  if (n < 1 || n > 64) fail(ErrorCode::bad_checkpoint, path + ": " + key + " must be in [1, 64], got " + std::to_string(n));
  return n;
}

// A tensor's name without the prefix some savers add ("medusa_head.0.1.weight" -> "0.1.weight").
std::string local_name(const std::string& name) {
  static const char* const kPrefixes[] = {"medusa_head.", "medusa_heads.", "model.medusa_head."};
  for (const char* p : kPrefixes) {
    const std::string prefix(p);
    if (name.compare(0, prefix.size(), prefix) == 0) return name.substr(prefix.size());
  }
  return name;
}

}  // namespace

MedusaHeads load_medusa_heads(const std::string& dir, const ModelConfig& model) {
  namespace fs = std::filesystem;
  const std::string config_path = dir + "/config.json";
  const std::string weights_path = dir + "/medusa_lm_head.safetensors";
  if (!fs::is_directory(dir)) fail(ErrorCode::not_found, dir + " is not a directory");
  if (!fs::exists(config_path)) fail(ErrorCode::not_found, config_path + " does not exist");
  if (!fs::exists(weights_path)) {
    if (fs::exists(dir + "/medusa_lm_head.pt"))
      fail(ErrorCode::unsupported, pickle_refusal(dir, "medusa_lm_head.pt", "medusa_lm_head.safetensors"));
    fail(ErrorCode::not_found, weights_path + " does not exist");
  }
  const json::Value doc = json::parse_file(config_path);
  if (!doc.is_object()) fail(ErrorCode::bad_checkpoint, config_path + " must hold a JSON object");
  MedusaHeads m;
  m.source = dir;
  m.hidden = model.hidden_size;
  m.vocab = model.vocab_size;
  const int64_t num_heads = positive_int(doc, "medusa_num_heads", 0, config_path);
  m.num_layers = static_cast<int32_t>(positive_int(doc, "medusa_num_layers", 1, config_path));
  if (m.num_layers > 8)
    fail(ErrorCode::bad_checkpoint, config_path + ": medusa_num_layers must be in [1, 8], got " + std::to_string(m.num_layers));

  const SafetensorsFile file(weights_path);
  std::map<std::string, const TensorInfo*> tensors;
  for (const TensorInfo& t : file.tensors()) tensors[local_name(t.name)] = &t;
  const int64_t H = model.hidden_size, V = model.vocab_size;
  auto read = [&](const std::string& name, std::vector<int64_t> shape, const char* what) {
    const auto it = tensors.find(name);
    if (it == tensors.end())
      fail(ErrorCode::not_found, weights_path + " has no tensor '" + name + "' (" + what + "; config.json says " +
                                     std::to_string(num_heads) + " heads of " + std::to_string(m.num_layers) + " block(s))");
    const TensorInfo& t = *it->second;
    if (t.shape != shape)
      fail(ErrorCode::bad_checkpoint, weights_path + ": tensor '" + t.name + "' is " + shape_text(t.shape) + " but " + what +
                                          " of a model with hidden_size " + std::to_string(H) + " and vocab_size " +
                                          std::to_string(V) + " is " + shape_text(shape));
    return tensor_as_f32(t, weights_path, "Medusa weights");
  };
  for (int64_t k = 0; k < num_heads; ++k) {
    MedusaHead& head = m.heads.emplace_back();
    const std::string h = std::to_string(k) + ".";
    for (int32_t l = 0; l < m.num_layers; ++l) {
      const std::string b = h + std::to_string(l) + ".linear.";
      head.blocks.push_back({read(b + "weight", {H, H}, "a residual block's weight"), read(b + "bias", {H}, "its bias")});
    }
    head.out = read(h + std::to_string(m.num_layers) + ".weight", {V, H}, "a head's vocabulary projection");
  }
  return m;
}

}  // namespace engine
