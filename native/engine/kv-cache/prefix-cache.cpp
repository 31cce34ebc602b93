#include "kv-cache/prefix-cache.h"

#include <algorithm>
#include <string>

#include "errors.h"
#include "kv-cache/kv-block-hash.h"

namespace engine {

void PrefixCache::resize(int32_t num_blocks) {
  entries_.assign(static_cast<size_t>(std::max(0, num_blocks)), Entry{});
  lookup_.clear();
  lru_.clear();
}

void PrefixCache::match(const int32_t* tokens, int32_t max_blocks, int32_t tokens_per_block,
                        std::vector<int32_t>& out, uint64_t root) const {
  uint64_t parent = root;
  for (int32_t b = 0; b < max_blocks; ++b) {
    const int32_t* block_tokens = tokens + static_cast<size_t>(b) * tokens_per_block;
    const uint64_t h = kv_block_hash(parent, block_tokens, tokens_per_block);
    const auto it = lookup_.find(h);
    if (it == lookup_.end()) return;
    const Entry& e = entries_[static_cast<size_t>(it->second)];
    // Parent hash and tokens must agree too: with the parent already verified the same way, a false match needs a
    // collision of the chained hash and the parent's at once.
    if (e.parent_hash != parent ||
        !std::equal(e.tokens.begin(), e.tokens.end(), block_tokens, block_tokens + tokens_per_block)) {
      return;
    }
    out.push_back(it->second);
    parent = h;
  }
}

void PrefixCache::on_full(int32_t block, uint64_t parent_hash, bool first, const int32_t* tokens, int32_t n) {
  Entry& e = entries_[static_cast<size_t>(block)];
  e.parent_hash = parent_hash;
  e.first = first;
  e.hash = kv_block_hash(parent_hash, tokens, n);
  e.tokens.assign(tokens, tokens + n);
  e.hashed = true;
  e.registered = lookup_.emplace(e.hash, block).second;
}

bool PrefixCache::keep_on_release(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  // A duplicate whose registered twin was evicted meanwhile takes its place, so the prefix stays findable.
  if (e.hashed && !e.registered) e.registered = lookup_.emplace(e.hash, block).second;
  if (!e.registered) {
    forget(block);
    return false;
  }
  if (e.in_lru) throw EngineError(ErrorCode::internal, "KV prefix cache: block " + std::to_string(block) + " released twice");
  e.lru_pos = lru_.insert(lru_.end(), block);
  e.in_lru = true;
  return true;
}

void PrefixCache::take(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!e.in_lru) throw EngineError(ErrorCode::internal, "KV prefix cache: block " + std::to_string(block) + " is not cached-unreferenced");
  lru_.erase(e.lru_pos);
  e.in_lru = false;
}

int32_t PrefixCache::evict(uint64_t* hash) {
  if (lru_.empty()) return -1;
  const int32_t block = lru_.front();
  lru_.pop_front();
  entries_[static_cast<size_t>(block)].in_lru = false;
  if (hash) *hash = entries_[static_cast<size_t>(block)].hash;
  forget(block);
  return block;
}

void PrefixCache::forget(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.registered) {
    const auto it = lookup_.find(e.hash);
    if (it != lookup_.end() && it->second == block) lookup_.erase(it);
  }
  e.hashed = false;
  e.registered = false;
  e.tokens.clear();
}

}  // namespace engine
