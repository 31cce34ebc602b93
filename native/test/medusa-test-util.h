// Medusa heads the tests and benches make without a checkpoint of heads: heads projecting with a model's own LM
// head (zero blocks — "echo" heads, each guessing what the LM head picks from the row it reads — or trained blocks
// from a file), and random heads of any shape.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "errors.h"
#include "loading/safetensors.h"
#include "medusa/medusa-heads.h"

namespace test {

// `n` heads of one block, each projecting with the checkpoint's LM head (lm_head.weight, else the tied embeddings).
// blocks_file empty: the blocks are zero; else its `<k>.0.linear.weight|bias` (scripts/train/train_medusa_heads.py).
inline std::shared_ptr<engine::MedusaHeads> lm_head_medusa_heads(const std::string& model_dir, int32_t n,
                                                                 const std::string& blocks_file = "") {
  using namespace engine;
  SafetensorsFile model(model_dir + "/model.safetensors");
  const TensorInfo* lm = model.find("lm_head.weight");
  if (lm == nullptr) lm = model.find("model.embed_tokens.weight");
  if (lm == nullptr) throw EngineError(ErrorCode::not_found, model_dir + ": no LM head");
  auto h = std::make_shared<MedusaHeads>();
  h->vocab = static_cast<int32_t>(lm->shape[0]);
  h->hidden = static_cast<int32_t>(lm->shape[1]);
  h->num_layers = 1;
  h->source = blocks_file.empty() ? "echo heads" : blocks_file;
  const auto H = static_cast<size_t>(h->hidden);
  const std::vector<float> out = tensor_as_f32(*lm, model.path(), "the LM head");
  std::unique_ptr<SafetensorsFile> blocks;
  if (!blocks_file.empty()) blocks = std::make_unique<SafetensorsFile>(blocks_file);
  for (int32_t k = 0; k < n; ++k) {
    MedusaHead& head = h->heads.emplace_back();
    MedusaHead::Block b{std::vector<float>(H * H, 0.0f), std::vector<float>(H, 0.0f)};
    if (blocks) {
      const std::string p = std::to_string(k) + ".0.linear.";
      const TensorInfo* w = blocks->find(p + "weight");
      const TensorInfo* bias = blocks->find(p + "bias");
      if (w == nullptr || bias == nullptr) throw EngineError(ErrorCode::not_found, blocks_file + ": no " + p + "weight/bias");
      b.w = tensor_as_f32(*w, blocks->path(), "a block");
      b.b = tensor_as_f32(*bias, blocks->path(), "a block");
    }
    head.blocks.push_back(std::move(b));
    head.out = out;
  }
  return h;
}

// `n` random heads of one block for a model of `hidden` and `vocab`: small weights (trained heads' blocks stay near
// their zero start), the same for a given seed.
inline std::shared_ptr<engine::MedusaHeads> random_medusa_heads(int32_t hidden, int32_t vocab, int32_t n,
                                                                uint64_t seed = 88172645463325252ull) {
  using namespace engine;
  uint64_t rng = seed;
  auto uniform = [&]() {  // [-1, 1)
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  };
  auto h = std::make_shared<MedusaHeads>();
  h->hidden = hidden;
  h->vocab = vocab;
  h->num_layers = 1;
  h->source = "random heads";
  const float ws = 0.5f / std::sqrt(static_cast<float>(hidden));
  for (int32_t k = 0; k < n; ++k) {
    MedusaHead& head = h->heads.emplace_back();
    MedusaHead::Block b;
    b.w.resize(static_cast<size_t>(hidden) * hidden);
    b.b.resize(static_cast<size_t>(hidden));
    for (float& v : b.w) v = uniform() * ws;
    for (float& v : b.b) v = uniform() * 0.1f;
    head.blocks.push_back(std::move(b));
    head.out.resize(static_cast<size_t>(vocab) * hidden);
    for (float& v : head.out) v = uniform() * 4.0f * ws;
  }
  return h;
}

}  // namespace test
