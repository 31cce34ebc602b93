#include "kv-cache/kv-block-hash.h"

namespace engine {

uint64_t kv_block_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  // The length goes in first so a block is never confused with a shorter one; each token is mixed with its slot
  // so the order matters.
  uint64_t h = hash_avalanche(parent ^ (0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(n) + 1)));
  for (int32_t i = 0; i < n; ++i) {
    const uint64_t t = static_cast<uint64_t>(static_cast<uint32_t>(tokens[i]));
    h = hash_avalanche(h ^ (t + (static_cast<uint64_t>(i) << 32)));
  }
  return h;
}

uint64_t kv_block_root(uint64_t lora_key, uint64_t table_key) {
  const uint64_t root =
      lora_key == 0 ? kv_root_block_hash : hash_avalanche(kv_root_block_hash ^ hash_avalanche(lora_key));
  // (A second mix so an adapter key and a table key of equal value still give different roots.)
  return table_key == 0 ? root
                        : hash_avalanche(root ^ hash_avalanche(hash_avalanche(table_key) + 0x243f6a8885a308d3ull));
}

}  // namespace engine
