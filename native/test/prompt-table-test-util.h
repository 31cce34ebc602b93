// P-tuning test helpers: a prompt table whose rows are real tokens' embedding rows, read from the checkpoint as the
// model reads them (F32 as is, F16 widened), so a virtual token fed from it must act exactly as the real token.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loading/safetensors.h"
#include "model/prompt-table.h"

namespace test {

// Rows `tokens` of the checkpoint's token embedding, as a [tokens.size(), hidden] table.
inline std::shared_ptr<const engine::PromptTable> table_of_tokens(const std::string& dir,
                                                                 const std::vector<int32_t>& tokens) {
  engine::SafetensorsFile f(dir + "/model.safetensors");
  const engine::TensorInfo* t = f.find("model.embed_tokens.weight");
  if (t == nullptr) t = f.find("transformer.wte.weight");
  if (t == nullptr || t->shape.size() != 2) throw std::runtime_error("no token embedding in " + dir);
  const int64_t hidden = t->shape[1];
  std::vector<float> data;
  for (int32_t token : tokens)
    for (int64_t i = 0; i < hidden; ++i) {
      const int64_t at = token * hidden + i;
      if (t->dtype == engine::DType::f32) {
        float v;
        std::memcpy(&v, t->data + at * 4, 4);
        data.push_back(v);
      } else if (t->dtype == engine::DType::f16) {
        uint16_t h;
        std::memcpy(&h, t->data + at * 2, 2);
        data.push_back(engine::f16_to_f32(h));
      } else {
        throw std::runtime_error("embedding of " + dir + " is " + t->dtype_name + ", not F32 or F16");
      }
    }
  return engine::make_prompt_table(static_cast<int32_t>(tokens.size()), static_cast<int32_t>(hidden), std::move(data));
}

// A table of `rows` random rows of width `hidden` (values in [-scale, scale]) from `seed`.
inline std::shared_ptr<const engine::PromptTable> random_table(int32_t rows, int32_t hidden, uint32_t seed,
                                                              float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> data(static_cast<size_t>(rows) * static_cast<size_t>(hidden));
  for (float& v : data) v = u(gen);
  return engine::make_prompt_table(rows, hidden, std::move(data));
}

}  // namespace test
