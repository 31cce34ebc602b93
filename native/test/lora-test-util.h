// Random LoRA adapters for tests: deterministic from a seed, so every rank of a grid builds the same one.
#pragma once
#include <memory>
#include <random>
#include <vector>

#include "lora/lora-adapter.h"

namespace test {

// Rank r on `modules` of `layers` of the model's shapes, A and B filled by fill(layer, module, is_b, values).
template <typename Fill>
engine::LoraAdapter lora_adapter_of(const engine::ModelConfig& c, const std::vector<engine::LoraModule>& modules,
                                    const std::vector<int32_t>& layers, int32_t r, Fill fill) {
  engine::LoraAdapter a;
  for (int32_t l : layers) {
    for (engine::LoraModule m : modules) {
      const engine::LoraModuleDims d = engine::lora_module_dims(c, m);
      engine::LoraWeight w;
      w.layer = l;
      w.module = m;
      w.rank = r;
      w.in = d.in;
      w.out = d.out;
      w.a.resize(static_cast<size_t>(r * d.in));
      w.b.resize(static_cast<size_t>(d.out * r));
      fill(l, m, false, w.a);
      fill(l, m, true, w.b);
      a.weights.push_back(std::move(w));
    }
  }
  return a;
}

// Uniform random values from a seed, large enough to change a tiny model's greedy outputs.
inline std::shared_ptr<const engine::LoraAdapter> random_adapter(const engine::ModelConfig& c,
                                                                 std::vector<engine::LoraModule> modules,
                                                                 std::vector<int32_t> layers, int32_t r,
                                                                 uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ua(-0.1f, 0.1f), ub(-0.2f, 0.2f);
  return std::make_shared<engine::LoraAdapter>(
      lora_adapter_of(c, modules, layers, r, [&](int32_t, engine::LoraModule, bool is_b, std::vector<float>& v) {
        for (float& x : v) x = is_b ? ub(rng) : ua(rng);
      }));
}

inline const std::vector<engine::LoraModule>& all_lora_modules() {
  static const std::vector<engine::LoraModule> all = {
      engine::LoraModule::attn_q,      engine::LoraModule::attn_k,   engine::LoraModule::attn_v,
      engine::LoraModule::attn_dense,  engine::LoraModule::mlp_h_to_4h, engine::LoraModule::mlp_gate,
      engine::LoraModule::mlp_4h_to_h};
  return all;
}

}  // namespace test
