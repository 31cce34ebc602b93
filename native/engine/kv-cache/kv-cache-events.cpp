#include "kv-cache/kv-cache-events.h"

namespace engine {

void KvCacheEventBuffer::record_created(int32_t num_blocks) {
  KvCacheEvent e;
  e.type = KvCacheEventType::created;
  e.num_blocks = num_blocks;
  std::lock_guard<std::mutex> lock(mu_);
  push(std::move(e));
}

void KvCacheEventBuffer::record_stored(bool has_parent, uint64_t parent_hash, std::vector<KvStoredBlock>&& blocks) {
  if (blocks.empty()) return;
  KvCacheEvent e;
  e.type = KvCacheEventType::stored;
  e.has_parent = has_parent;
  e.parent_hash = has_parent ? parent_hash : 0;
  e.blocks = std::move(blocks);
  std::lock_guard<std::mutex> lock(mu_);
  push(std::move(e));
}

void KvCacheEventBuffer::record_removed(uint64_t block_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!events_.empty() && events_.back().type == KvCacheEventType::removed) {
    events_.back().removed_hashes.push_back(block_hash);
    return;
  }
  KvCacheEvent e;
  e.type = KvCacheEventType::removed;
  e.removed_hashes.push_back(block_hash);
  push(std::move(e));
}

void KvCacheEventBuffer::push(KvCacheEvent&& e) {
  e.event_id = next_id_++;
  e.window_size = window_size_;
  if (max_size_ <= 0) {
    ++dropped_;
    return;
  }
  while (events_.size() >= static_cast<size_t>(max_size_)) {
    events_.pop_front();
    ++dropped_;
  }
  events_.push_back(std::move(e));
}

std::deque<KvCacheEvent> KvCacheEventBuffer::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<KvCacheEvent> out;
  out.swap(events_);
  return out;
}

int64_t KvCacheEventBuffer::num_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace engine
