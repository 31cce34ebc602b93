// What the speculation tests build on: a Model that passes everything to another (a test overrides what it watches
// or withholds), and a copy of a checkpoint of heads with its config.json replaced and its tensors edited (the
// broken heads a loader must refuse).
#pragma once
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loading/safetensors.h"
#include "model/model.h"
#include "temp-dir.h"

namespace test {

class WrappedModel : public engine::Model {
 public:
  explicit WrappedModel(std::unique_ptr<engine::Model> inner) : inner_(std::move(inner)) {}
  const engine::ModelConfig& config() const override { return inner_->config(); }
  size_t kv_bytes_per_token() const override { return inner_->kv_bytes_per_token(); }
  void allocate_kv(int32_t blocks, int32_t tokens_per_block) override { inner_->allocate_kv(blocks, tokens_per_block); }
  void copy_kv_block(int32_t src, int32_t dst) override { inner_->copy_kv_block(src, dst); }
  size_t weight_bytes() const override { return inner_->weight_bytes(); }
  void forward(const std::vector<engine::SequenceChunk>& chunks, engine::ForwardOutput& out) override {
    inner_->forward(chunks, out);
  }

 protected:
  std::unique_ptr<engine::Model> inner_;
};

// A copy of `dir` (its config.json and safetensors file `weights`) under /tmp: config.json replaced by
// `config_json` (empty: kept), the tensors passed through `edit` (when given).
inline std::string edited_copy(const std::string& dir, const std::string& weights, const std::string& config_json,
                               const std::function<void(std::vector<engine::TensorToWrite>&)>& edit = nullptr) {
  const std::string out = make_temp_dir("heads-edited");
  if (config_json.empty()) {
    std::ifstream in(dir + "/config.json");
    std::ofstream(out + "/config.json") << in.rdbuf();
  } else {
    std::ofstream(out + "/config.json") << config_json;
  }
  engine::SafetensorsFile f(dir + "/" + weights);
  std::vector<engine::TensorToWrite> ts;
  for (const engine::TensorInfo& t : f.tensors())
    ts.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  if (edit) edit(ts);
  engine::write_safetensors(out + "/" + weights, ts);
  return out;
}

}  // namespace test
