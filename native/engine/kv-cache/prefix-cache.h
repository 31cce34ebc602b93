// The lookup side of KV prefix reuse (TensorRT-LLM's enable_block_reuse): which full blocks hold which prefix,
// and the LRU of cached blocks no sequence references any more. Reference counts and the free list stay in
// KvCacheManager (kv-cache.h); this class only remembers content.
//
// Life of a block under reuse: private and partial while a sequence fills it -> full: hashed (kv-block-hash.h)
// and registered in the lookup table, unless another block already holds the same prefix -> possibly attached
// by other sequences (read only: a full block is never written again) -> when the last reference goes, kept in
// the LRU as "cached, unreferenced" (it still counts as free) -> attached again by a matching prompt, or evicted
// (unregistered) when the free list is empty and a fresh block is needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace engine {

class PrefixCache {
 public:
  void resize(int32_t num_blocks);

  // Appends to `out` the registered blocks holding the first full blocks of `tokens` (tokens_per_block each), at
  // most max_blocks, stopping at the first block that is not cached.
  // `root`: the first block's parent (kv_block_root: a LoRA adapter's blocks chain from a root of their own).
  void match(const int32_t* tokens, int32_t max_blocks, int32_t tokens_per_block, std::vector<int32_t>& out,
             uint64_t root) const;

  bool is_hashed(int32_t block) const { return entries_[static_cast<size_t>(block)].hashed; }
  // The block is the one a prompt finds for its prefix (what KV cache events report as stored).
  bool is_registered(int32_t block) const { return entries_[static_cast<size_t>(block)].registered; }
  uint64_t parent_hash_of(int32_t block) const { return entries_[static_cast<size_t>(block)].parent_hash; }
  const std::vector<int32_t>& tokens_of(int32_t block) const { return entries_[static_cast<size_t>(block)].tokens; }
  uint64_t hash_of(int32_t block) const { return entries_[static_cast<size_t>(block)].hash; }
  // A sequence's first block (its parent is a root: kv-block-hash.h's kv_block_root).
  bool is_first(int32_t block) const { return entries_[static_cast<size_t>(block)].first; }

  // `block` just became full and its K/V are written: record its hash, and register it unless another block
  // already holds the same prefix (two sequences that computed the same prompt side by side; the first wins).
  void on_full(int32_t block, uint64_t parent_hash, bool first, const int32_t* tokens, int32_t n);

  // The block's last reference is gone. Returns true when it stays cached (newest end of the LRU) because it is
  // the registered holder of its prefix, or can become it now; otherwise forgets its content and returns false,
  // and the caller puts it back on the free list.
  bool keep_on_release(int32_t block);
  // A cached, unreferenced block is attached by a sequence: out of the LRU (no longer evictable).
  void take(int32_t block);
  int32_t num_evictable() const { return static_cast<int32_t>(lru_.size()); }
  // Unregisters and returns the least recently released cached block (its hash into *hash); -1 when there is none.
  int32_t evict(uint64_t* hash = nullptr);

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    bool hashed = false;      // full, content recorded
    bool first = false;       // a sequence's first block
    bool registered = false;  // lookup_[hash] == this block
    bool in_lru = false;
    std::vector<int32_t> tokens;  // compared on lookup, so a 64-bit hash collision cannot attach wrong K/V
    std::list<int32_t>::iterator lru_pos;
  };
  void forget(int32_t block);

  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, int32_t> lookup_;
  std::list<int32_t> lru_;  // front: released longest ago (evicted first)
};

}  // namespace engine
