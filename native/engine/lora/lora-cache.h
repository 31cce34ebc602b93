// The executor's LoRA adapters, on both sides of TensorRT-LLM's PEFT cache. Host side (LoraCache): adapters by task
// id, least recently used evicted past lora_cache_host_memory_bytes; a preloaded adapter (--lora-modules) evicted
// from it is read again from its directory when next named. Device side (LoraSlots): which adapter each of the
// model's slots holds, least recently used replaced. Adapters are shared: a request holds its adapter from enqueue
// to its end, so evicting a task never takes the weights from under a request that runs with them; it only means
// the task's next request must bring them again (the seeds' "cache full: oldest evicted").
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lora/lora-adapter.h"

namespace engine {

// One adapter as cached: the weights and the executor's key for them, unique per adapter ever cached (never 0),
// so slots and prefix-cache chains tell apart two adapters that were sent under the same task id.
struct CachedLora {
  std::shared_ptr<const LoraAdapter> adapter;
  uint64_t key = 0;
};

class LoraCache {
 public:
  using ReadDir = std::function<LoraAdapter(const std::string& dir)>;
  // preloaded: task id -> PEFT directory, read with read_dir (at once, so a bad adapter stops the startup).
  LoraCache(int64_t host_memory_bytes, std::vector<std::pair<uint64_t, std::string>> preloaded, ReadDir read_dir);

  // Caches `adapter` under task_id (replacing what the id held) and evicts the least recently used others until
  // the cache fits its bytes. Throws EngineError(invalid_argument) when the adapter alone is larger.
  CachedLora put(uint64_t task_id, std::shared_ptr<const LoraAdapter> adapter);
  // The task's adapter, now the most recently used; a preloaded task no longer cached is read again. nullopt: the
  // task is neither cached nor preloaded. Safe from any thread.
  std::optional<CachedLora> get(uint64_t task_id);
  bool is_preloaded(uint64_t task_id) const;

  int64_t bytes() const;
  int64_t evictions() const;
  size_t size() const;

 private:
  CachedLora put_locked(uint64_t task_id, std::shared_ptr<const LoraAdapter> adapter);
  struct Entry {
    CachedLora lora;
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru_pos;
  };
  const int64_t budget_;
  const std::unordered_map<uint64_t, std::string> preloaded_;
  const ReadDir read_dir_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // task ids, front: used longest ago
  int64_t bytes_ = 0, evictions_ = 0;
  uint64_t next_key_ = 1;
};

// The model's slots (loop thread only).
class LoraSlots {
 public:
  explicit LoraSlots(int32_t num_slots) : slots_(static_cast<size_t>(num_slots)) {}
  int32_t size() const { return static_cast<int32_t>(slots_.size()); }
  // The slot holding the adapter with `key`, or -1.
  int32_t find(uint64_t key) const;
  // A slot for `key` now: the one holding it, else an empty one, else the least recently used one whose adapter
  // no chunk of this pass uses (in_use(key) false). -1: every slot is in use. *load: the slot must be loaded with
  // the adapter (it held another or nothing). Marks the slot used now.
  int32_t assign(uint64_t key, const std::function<bool(uint64_t)>& in_use, bool* load);
  // Forgets what slot holds (after a failed load).
  void clear(int32_t slot);

 private:
  struct Slot {
    uint64_t key = 0;  // 0: empty
    uint64_t last_used = 0;
  };
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace engine
