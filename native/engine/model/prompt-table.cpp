#include "model/prompt-table.h"

#include <cstring>

namespace engine {
namespace {

// The finaliser kv-block-hash.cpp uses: nearby tables (one value different) land far apart.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t prompt_table_key(const PromptTable& table) {
  uint64_t h = mix(0x3c6ef372fe94f82bull ^ (static_cast<uint64_t>(static_cast<uint32_t>(table.rows)) << 32) ^
                   static_cast<uint32_t>(table.hidden));
  for (size_t i = 0; i < table.data.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &table.data[i], 4);
    h = mix(h ^ (bits + (static_cast<uint64_t>(i) << 32)));
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
