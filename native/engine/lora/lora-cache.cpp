#include "lora/lora-cache.h"

#include <string>

#include "errors.h"

namespace engine {

LoraCache::LoraCache(int64_t host_memory_bytes, std::vector<std::pair<uint64_t, std::string>> preloaded,
                     ReadDir read_dir)
    : budget_(host_memory_bytes), preloaded_(preloaded.begin(), preloaded.end()), read_dir_(std::move(read_dir)) {
  for (const auto& [task, dir] : preloaded) {
    std::shared_ptr<const LoraAdapter> adapter;
    try {
      adapter = std::make_shared<const LoraAdapter>(read_dir_(dir));
    } catch (const EngineError& e) {
      // Which of the --lora-modules adapters (the task ids are 1, 2, ... in their order, logged at startup).
      throw EngineError(e.code(), "the LoRA adapter preloaded as task id " + std::to_string(task) + " (--lora-modules): " +
                                      e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    put_locked(task, std::move(adapter));
  }
}

CachedLora LoraCache::put(uint64_t task_id, std::shared_ptr<const LoraAdapter> adapter) {
  std::lock_guard<std::mutex> lock(mu_);
  return put_locked(task_id, std::move(adapter));
}

CachedLora LoraCache::put_locked(uint64_t task_id, std::shared_ptr<const LoraAdapter> adapter) {
  const int64_t bytes = static_cast<int64_t>(adapter->bytes());
  if (bytes > budget_) {
    throw EngineError(ErrorCode::invalid_argument,
                      "lora_task_id " + std::to_string(task_id) + ": the adapter takes " + std::to_string(bytes) +
                          " bytes, more than the whole LoRA host cache (lora_cache_host_memory_bytes " +
                          std::to_string(budget_) + "); raise --lora-cache-host-memory-bytes");
  }
  if (auto it = entries_.find(task_id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru_pos);
    entries_.erase(it);
  }
  while (bytes_ + bytes > budget_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.front());
    bytes_ -= victim->second.bytes;
    entries_.erase(victim);
    lru_.pop_front();
    ++evictions_;
  }
  Entry e;
  e.lora = {std::move(adapter), next_key_++};
  e.bytes = bytes;
  e.lru_pos = lru_.insert(lru_.end(), task_id);
  bytes_ += bytes;
  return entries_.emplace(task_id, std::move(e)).first->second.lora;
}

std::optional<CachedLora> LoraCache::get(uint64_t task_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(task_id); it != entries_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
    return it->second.lora;
  }
  auto pre = preloaded_.find(task_id);
  if (pre == preloaded_.end()) return std::nullopt;
  // Read under the lock: two requests naming the evicted adapter at once read it once.
  return put_locked(task_id, std::make_shared<const LoraAdapter>(read_dir_(pre->second)));
}

bool LoraCache::is_preloaded(uint64_t task_id) const { return preloaded_.count(task_id) != 0; }

int64_t LoraCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t LoraCache::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

size_t LoraCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

int32_t LoraSlots::find(uint64_t key) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].key == key) return static_cast<int32_t>(i);
  return -1;
}

int32_t LoraSlots::assign(uint64_t key, const std::function<bool(uint64_t)>& in_use, bool* load) {
  *load = false;
  int32_t slot = find(key);
  if (slot < 0) {
    for (size_t i = 0; i < slots_.size() && slot < 0; ++i)
      if (slots_[i].key == 0) slot = static_cast<int32_t>(i);
  }
  if (slot < 0) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (in_use(slots_[i].key)) continue;
      if (slot < 0 || slots_[i].last_used < slots_[slot].last_used) slot = static_cast<int32_t>(i);
    }
  }
  if (slot < 0) return -1;
  if (slots_[slot].key != key) {
    slots_[slot].key = key;
    *load = true;
  }
  slots_[slot].last_used = ++clock_;
  return slot;
}

void LoraSlots::clear(int32_t slot) {
  if (slot >= 0 && static_cast<size_t>(slot) < slots_.size()) slots_[slot] = {};
}

}  // namespace engine
