#include "scheduler.h"

#include <algorithm>

namespace engine {
namespace {

int32_t blocks_for(int64_t tokens, int32_t tokens_per_block) {
  return tokens <= 0 ? 0 : static_cast<int32_t>((tokens + tokens_per_block - 1) / tokens_per_block);
}

// Tokens this entry would feed now given `tokens_left` in the budget; 0 when it cannot run this iteration.
int32_t chunk_length(const SchedulerConfig& config, const SchedulerEntry& e, int64_t tokens_left) {
  const int32_t remaining = e.num_tokens - e.num_computed;
  if (remaining <= 0) return 0;
  if (remaining <= tokens_left) return remaining;
  const bool chunkable = !e.in_generation && (config.enable_chunked_context || e.is_resume);
  if (!chunkable || tokens_left <= 0) return 0;
  return static_cast<int32_t>(tokens_left);
}

}  // namespace

SchedulePlan schedule_iteration(const SchedulerConfig& config, const std::vector<SchedulerEntry>& running,
                                const std::vector<SchedulerEntry>& queued, int32_t free_blocks) {
  SchedulePlan plan;
  const int32_t tpb = std::max(1, config.tokens_per_block);
  int64_t tokens_left = config.max_num_tokens;
  int32_t slots_left = config.max_batch_size;
  int64_t free = free_blocks;
  const bool no_evict = config.policy == CapacitySchedulerPolicy::guaranteed_no_evict;

  int64_t taken = 0;  // blocks the planned chunks take from the free pool this iteration
  auto add = [&](const SchedulerEntry& e, int32_t n, bool is_new) {
    taken += std::max(0, blocks_for(e.num_computed + n, tpb) - e.num_blocks_held);
    ScheduledWork w;
    w.id = e.id;
    w.num_new_tokens = n;
    w.is_context = !e.in_generation;
    w.is_new = is_new;
    plan.work.push_back(w);
    tokens_left -= n;
    --slots_left;
    if (w.is_context) { ++plan.num_context; plan.num_context_tokens += n; }
    else ++plan.num_generation;
  };

  if (no_evict) {
    // Reserve what every running sequence can still grow to; admission only spends what is left.
    int64_t reserved = 0;
    for (const SchedulerEntry& e : running)
      reserved += std::max<int64_t>(0, blocks_for(e.lifetime_tokens, tpb) - e.num_blocks_held);
    for (const SchedulerEntry& e : running) {
      if (slots_left <= 0) break;
      const int32_t n = chunk_length(config, e, tokens_left);
      if (n == 0) continue;  // over the token budget: stays running, holds its blocks, runs next iteration
      add(e, n, false);
    }
    int64_t available = free - reserved;
    for (const SchedulerEntry& e : queued) {
      if (slots_left <= 0) break;
      const int32_t lifetime = blocks_for(e.lifetime_tokens, tpb);
      if (lifetime - e.num_blocks_held > available) break;
      const int32_t n = chunk_length(config, e, tokens_left);
      if (n == 0) break;
      available -= lifetime - e.num_blocks_held;
      add(e, n, true);
    }
    // Only this iteration's blocks are taken now; the rest of each reservation is taken as sequences grow.
    plan.num_blocks_after = static_cast<int32_t>(free - taken);
    return plan;
  }

  // MAX_UTILIZATION. `end` shrinks as sequences are paused from the back (most recently started first).
  size_t end = running.size();
  for (size_t i = 0; i < end; ++i) {
    const SchedulerEntry& e = running[i];
    if (slots_left <= 0) break;
    const int32_t n = chunk_length(config, e, tokens_left);
    if (n == 0) continue;
    const int64_t need = std::max(0, blocks_for(e.num_computed + n, tpb) - e.num_blocks_held);
    while (need > free && end > i + 1) {
      --end;
      plan.paused.push_back(running[end].id);
      free += running[end].num_blocks_held;
    }
    if (need > free) {  // it is itself the most recent one left: pause it
      plan.paused.push_back(e.id);
      free += e.num_blocks_held;
      end = i;
      break;
    }
    free -= need;
    add(e, n, false);
  }
  // Nothing new starts in an iteration that had to evict: the pool is full, and a paused sequence must not be
  // overtaken by a newcomer.
  if (plan.paused.empty()) {
    for (const SchedulerEntry& e : queued) {
      if (slots_left <= 0) break;
      const int32_t n = chunk_length(config, e, tokens_left);
      if (n == 0) break;
      const int64_t need = std::max(0, blocks_for(e.num_computed + n, tpb) - e.num_blocks_held);
      if (need > free) break;
      free -= need;
      add(e, n, true);
    }
  }
  plan.num_blocks_after = static_cast<int32_t>(free);
  return plan;
}

}  // namespace engine
