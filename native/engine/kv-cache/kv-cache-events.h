// KV cache events (TensorRT-LLM's KVCacheEvent, recorded when KvCacheConfig.event_buffer_max_size > 0): what the
// prefix cache holds, told as a stream a router can replay into its own index of "which replica caches which
// prefix". Only with prefix reuse on, since only then do blocks have a content identity.
//
//   created: the pool exists (once).
//   stored:  consecutive full blocks of one sequence were registered in the prefix cache; parent_hash is the hash
//            of the block before the first one (none for a sequence's first block), so each stored block's parent
//            is either parent_hash or the block before it in the same event.
//   removed: registered blocks were evicted; their content is gone and a prompt can no longer attach them.
// TensorRT-LLM's "updated" (a block's priority or cache level changed) is never recorded: this engine has one
// cache level and no retention priorities.
//
// Recorded by the executor's loop thread (through KvCacheManager), drained from any thread.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace engine {

enum class KvCacheEventType { created, stored, removed };

struct KvStoredBlock {
  uint64_t block_hash = 0;       // kv-block-hash.h: chained from the parent's hash and the block's tokens
  std::vector<int32_t> tokens;   // [tokens_per_block]
};

struct KvCacheEvent {
  int64_t event_id = 0;          // 0, 1, 2, ... per executor; a gap means events were dropped (buffer full)
  KvCacheEventType type = KvCacheEventType::created;
  int32_t window_size = 0;       // the attention window the pool serves, in tokens (TensorRT-LLM's window_size)
  // created
  int32_t num_blocks = 0;        // the pool's size (TensorRT-LLM: num_blocks_per_cache_level[0])
  // stored
  bool has_parent = false;       // false: blocks[0] is a sequence's first block
  uint64_t parent_hash = 0;
  std::vector<KvStoredBlock> blocks;
  // removed
  std::vector<uint64_t> removed_hashes;
};

// A bounded FIFO of events. Full, it drops the oldest event (never blocks the loop) and counts the drop.
class KvCacheEventBuffer {
 public:
  KvCacheEventBuffer(int32_t max_size, int32_t window_size) : max_size_(max_size), window_size_(window_size) {}

  void record_created(int32_t num_blocks);
  void record_stored(bool has_parent, uint64_t parent_hash, std::vector<KvStoredBlock>&& blocks);
  // Consecutive removals merge into one event while it is not drained yet (as TensorRT-LLM does), so evicting a
  // long chain block by block costs one event, not one per block.
  void record_removed(uint64_t block_hash);

  // Every event recorded since the last drain, oldest first.
  std::deque<KvCacheEvent> drain();
  int64_t num_dropped() const;  // events dropped because the buffer was full, since construction

 private:
  void push(KvCacheEvent&& e);  // with mu_ held

  const int32_t max_size_;
  const int32_t window_size_;
  mutable std::mutex mu_;
  std::deque<KvCacheEvent> events_;
  int64_t next_id_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace engine
