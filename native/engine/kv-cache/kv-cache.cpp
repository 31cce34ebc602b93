#include "kv-cache/kv-cache.h"

#include <algorithm>
#include <string>

#include "errors.h"

namespace engine {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t tokens_per_block, bool enable_reuse,
                               KvCacheEventBuffer* events)
    : tokens_per_block_(tokens_per_block), blocks_(static_cast<size_t>(num_blocks > 0 ? num_blocks : 0)),
      reuse_(enable_reuse), events_(enable_reuse ? events : nullptr) {
  if (num_blocks < 0 || tokens_per_block <= 0) {
    throw EngineError(ErrorCode::invalid_argument,
                      "KV cache needs num_blocks >= 0 and tokens_per_block > 0, got " + std::to_string(num_blocks) +
                          " and " + std::to_string(tokens_per_block));
  }
  free_list_.reserve(blocks_.size());
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_list_.push_back(id);
  if (reuse_) prefix_.resize(num_blocks);
  if (events_) events_->record_created(num_blocks);
}

int32_t KvCacheManager::blocks_for_tokens(int64_t num_tokens) const {
  if (num_tokens <= 0) return 0;
  return static_cast<int32_t>((num_tokens + tokens_per_block_ - 1) / tokens_per_block_);
}

int32_t KvCacheManager::allocate_block() {
  // Never-cached blocks first; only when they run out is the least recently used cached prefix given up.
  int32_t id = -1;
  if (!free_list_.empty()) {
    id = free_list_.back();
    free_list_.pop_back();
  } else {
    uint64_t hash = 0;
    id = prefix_.evict(&hash);
    if (id < 0) throw EngineError(ErrorCode::internal, "KV cache: allocating with no free block (caller did not check)");
    if (events_) events_->record_removed(hash);
  }
  blocks_[id].ref_count = 1;
  ++alloc_total_blocks_;
  ++alloc_new_blocks_;
  return id;
}

void KvCacheManager::unref_block(int32_t id) {
  if (id < 0 || id >= num_blocks() || blocks_[id].ref_count <= 0) {
    throw EngineError(ErrorCode::internal, "KV cache: releasing block " + std::to_string(id) + " that is not in use");
  }
  if (--blocks_[id].ref_count != 0) return;
  if (!reuse_) {
    free_list_.push_back(id);
    return;
  }
  const bool was_registered = prefix_.is_registered(id);
  if (!prefix_.keep_on_release(id)) {
    free_list_.push_back(id);
    return;
  }
  // A duplicate that took the place of its evicted twin: the prefix is findable again, so it is stored again.
  if (events_ && !was_registered) record_stored(&id, 1);
}

bool KvCacheManager::ensure_capacity(BlockTable& table, int64_t num_tokens) {
  const int32_t needed = blocks_for_tokens(num_tokens) - static_cast<int32_t>(table.size());
  if (needed <= 0) return true;
  if (needed > num_free_blocks()) return false;
  for (int32_t i = 0; i < needed; ++i) table.push_back(allocate_block());
  return true;
}

void KvCacheManager::release(BlockTable& table) {
  // Release in reverse so the first block of the sequence ends on top of the free stack: the next sequence then
  // gets the same low ids, keeping allocation order stable across runs.
  for (auto it = table.rbegin(); it != table.rend(); ++it)
    if (*it >= 0) unref_block(*it);
  table.clear();
}

void KvCacheManager::release_front(BlockTable& table, int64_t first_kept) {
  const size_t end = static_cast<size_t>(std::clamp<int64_t>(first_kept, 0, static_cast<int64_t>(table.size())));
  for (size_t i = end; i-- > 0;) {
    if (table[i] < 0) break;  // released by an earlier step, and so is everything before it
    unref_block(table[i]);
    table[i] = -1;
  }
}

int32_t KvCacheManager::blocks_held(const BlockTable& table) {
  return static_cast<int32_t>(std::count_if(table.begin(), table.end(), [](int32_t id) { return id >= 0; }));
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  s.max_num_blocks = num_blocks();
  s.free_num_blocks = num_free_blocks();
  s.used_num_blocks = num_used_blocks();
  s.tokens_per_block = tokens_per_block_;
  s.alloc_total_blocks = alloc_total_blocks_;
  s.alloc_new_blocks = alloc_new_blocks_;
  s.reused_blocks = reused_blocks_;
  return s;
}

}  // namespace engine
