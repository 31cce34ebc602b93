// Copy-on-write sharing of KV blocks between the beams of one request (see kv-cache.h).
#include <string>

#include "errors.h"
#include "kv-cache/kv-cache.h"

namespace engine {

void KvCacheManager::share(const BlockTable& table) {
  for (int32_t id : table) {
    if (id < 0 || id >= num_blocks() || blocks_[id].ref_count <= 0)
      throw EngineError(ErrorCode::internal, "KV cache: sharing block " + std::to_string(id) + " that is not in use");
    ++blocks_[id].ref_count;
  }
}

int32_t KvCacheManager::ref_count(int32_t block) const {
  return block >= 0 && block < num_blocks() ? blocks_[block].ref_count : 0;
}

int32_t KvCacheManager::make_writable(BlockTable& table, size_t index) {
  if (index >= table.size())
    throw EngineError(ErrorCode::internal, "KV cache: make_writable of entry " + std::to_string(index) +
                                               " in a table of " + std::to_string(table.size()) + " blocks");
  const int32_t old = table[index];
  if (ref_count(old) <= 1) return -1;
  if (num_free_blocks() <= 0)
    throw EngineError(ErrorCode::internal, "KV cache: no free block to copy shared block " + std::to_string(old) +
                                               " into (scheduler bug)");
  const int32_t fresh = allocate_block();
  unref_block(old);  // still referenced by another beam, so it stays allocated
  table[index] = fresh;
  return old;
}

}  // namespace engine
