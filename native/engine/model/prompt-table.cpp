#include "model/prompt-table.h"

#include <cstring>

#include "kv-cache/kv-block-hash.h"

namespace engine {

uint64_t prompt_table_key(const PromptTable& table) {
  uint64_t h = hash_avalanche(0x3c6ef372fe94f82bull ^
                              (static_cast<uint64_t>(static_cast<uint32_t>(table.rows)) << 32) ^
                              static_cast<uint32_t>(table.hidden));
  for (size_t i = 0; i < table.data.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &table.data[i], 4);
    h = hash_avalanche(h ^ (bits + (static_cast<uint64_t>(i) << 32)));
  }
  return h == 0 ? 1 : h;
}

std::shared_ptr<const PromptTable> make_prompt_table(int32_t rows, int32_t hidden, std::vector<float> data) {
  auto table = std::make_shared<PromptTable>();
  table->rows = rows;
  table->hidden = hidden;
  table->data = std::move(data);
  table->key = prompt_table_key(*table);
  return table;
}

}  // namespace engine
