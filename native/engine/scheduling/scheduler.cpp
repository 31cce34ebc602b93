#include "scheduling/scheduler.h"

#include <algorithm>

namespace engine {
namespace {

int32_t blocks_for(int64_t tokens, int32_t tokens_per_block) {
  return tokens <= 0 ? 0 : static_cast<int32_t>((tokens + tokens_per_block - 1) / tokens_per_block);
}

// Blocks covering `tokens` positions of `e`, all its beams together (see SchedulerEntry::beam_width).
int64_t entry_blocks_for(const SchedulerEntry& e, int64_t tokens, int32_t tokens_per_block) {
  const int64_t all = blocks_for(tokens, tokens_per_block);
  if (e.beam_width <= 1 || tokens <= e.prompt_len) return all;
  const int64_t shared = e.prompt_len / tokens_per_block;
  return shared + static_cast<int64_t>(e.beam_width) * (all - shared);
}

// Tokens a chunk of n positions feeds: one per live beam for a beam-search decode step.
int64_t tokens_fed(const SchedulerEntry& e, int32_t n) {
  return e.in_generation ? static_cast<int64_t>(n) * std::max(1, e.num_live_beams) : n;
}

// Tokens this entry would feed now given `tokens_left` in the budget; 0 when it cannot run this iteration.
int32_t chunk_length(const SchedulerConfig& config, const SchedulerEntry& e, int64_t tokens_left) {
  if (e.in_generation && e.num_live_beams > 1) return e.num_tokens > e.num_computed && tokens_left >= e.num_live_beams ? 1 : 0;
  const int32_t remaining = e.num_tokens - e.num_computed;
  if (remaining <= 0) return 0;
  if (remaining <= tokens_left) return remaining;
  const bool chunkable = !e.in_generation && (config.enable_chunked_context || e.is_resume);
  if (!chunkable || tokens_left <= 0) return 0;
  // End the chunk on a block boundary: every chunk but the last then fills whole blocks, which prefix reuse can
  // register as soon as they are written.
  const int64_t tpb = std::max(1, config.tokens_per_block);
  const int64_t aligned = (e.num_computed + tokens_left) / tpb * tpb - e.num_computed;
  if (aligned > 0) return static_cast<int32_t>(aligned);
  // Less than a block of budget left. A resume without chunked context has no unit to respect (and must not
  // wait for a whole free block of budget when max_num_tokens < tokens_per_block); a chunked prompt waits.
  return config.enable_chunked_context ? 0 : static_cast<int32_t>(tokens_left);
}

// decodes_from[i]: decode tokens of the running generation entries at index >= i, so the ones after a context
// entry can be set aside before its chunk is sized (in O(1) per entry).
std::vector<int64_t> decode_suffix_sums(const std::vector<SchedulerEntry>& running) {
  std::vector<int64_t> sums(running.size() + 1, 0);
  for (size_t i = running.size(); i-- > 0;)
    sums[i] = sums[i + 1] + (running[i].in_generation ? std::max(1, running[i].num_live_beams) : 0);
  return sums;
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
  // A running context got no chunk (less than a block of budget left after the decodes): nothing new starts,
  // so the decodes drain and newcomers' decodes cannot starve it forever.
  bool chunk_waiting = false;
  // Blocks `e` still has to take from the free pool to cover `tokens` positions.
  auto blocks_to_take = [&](const SchedulerEntry& e, int64_t tokens) -> int64_t {
    return std::max<int64_t>(0, entry_blocks_for(e, tokens, tpb) - e.num_blocks_held - e.num_shared_blocks);
  };
  // Running entries' budget: what is left minus the decodes still to come after entry i, up to `end`.
  const std::vector<int64_t> decodes_from = decode_suffix_sums(running);
  auto running_budget = [&](const std::vector<SchedulerEntry>& r, size_t i, size_t end) {
    return tokens_left - (r[i].in_generation ? 0 : decodes_from[i + 1] - decodes_from[end]);
  };
  auto add = [&](const SchedulerEntry& e, int32_t n, bool is_new) {
    taken += blocks_to_take(e, e.num_computed + n);
    ScheduledWork w;
    w.id = e.id;
    w.num_new_tokens = n;
    w.is_context = !e.in_generation;
    w.is_new = is_new;
    plan.work.push_back(w);
    tokens_left -= tokens_fed(e, n);
    --slots_left;
    if (w.is_context) { ++plan.num_context; plan.num_context_tokens += n; }
    else ++plan.num_generation;
  };

  if (no_evict) {
    // Reserve what every running sequence can still grow to; admission only spends what is left.
    int64_t reserved = 0;
    for (const SchedulerEntry& e : running) reserved += blocks_to_take(e, e.lifetime_tokens);
    for (size_t i = 0; i < running.size(); ++i) {
      const SchedulerEntry& e = running[i];
      if (slots_left <= 0) break;
      const int32_t n = chunk_length(config, e, running_budget(running, i, running.size()));
      if (n == 0) {  // over the token budget: stays running, holds its blocks, runs next iteration
        chunk_waiting |= !e.in_generation;
        continue;
      }
      add(e, n, false);
    }
    int64_t available = free - reserved;
    for (const SchedulerEntry& e : queued) {
      if (chunk_waiting) break;
      if (slots_left <= 0) break;
      // A shared prefix block is already counted (once) in the pool's use; only the rest is reserved.
      const int64_t lifetime = blocks_to_take(e, e.lifetime_tokens);
      if (lifetime > available) break;
      const int32_t n = chunk_length(config, e, tokens_left);
      if (n == 0) break;
      available -= lifetime;
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
    const int32_t n = chunk_length(config, e, running_budget(running, i, end));
    if (n == 0) {
      chunk_waiting |= !e.in_generation;
      continue;
    }
    const int64_t need = blocks_to_take(e, e.num_computed + n);
    while (need > free && end > i + 1) {
      --end;
      if (running[end].beam_width > 1) continue;  // never paused: it just does not run this iteration
      plan.paused.push_back(running[end].id);
      free += running[end].num_blocks_held;
    }
    if (need > free && e.beam_width > 1) continue;  // waits, holding its blocks, for older sequences to free some
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
  if (plan.paused.empty() && !chunk_waiting) {
    // Beam requests cannot be paused, so two of them must never wait on each other: one starts only when its
    // whole lifetime fits next to what the running ones can still grow to (other sequences are paused for them).
    int64_t beam_reserved = 0;
    for (const SchedulerEntry& r : running)
      if (r.beam_width > 1) beam_reserved += blocks_to_take(r, r.lifetime_tokens);
    for (const SchedulerEntry& e : queued) {
      if (slots_left <= 0) break;
      const int32_t n = chunk_length(config, e, tokens_left);
      if (n == 0) break;
      const int64_t need = blocks_to_take(e, e.num_computed + n);
      if (need > free) break;
      if (e.beam_width > 1) {
        const int64_t lifetime = blocks_to_take(e, e.lifetime_tokens);
        if (lifetime > free - beam_reserved) break;
        beam_reserved += lifetime;
      }
      free -= need;
      add(e, n, true);
    }
  }
  plan.num_blocks_after = static_cast<int32_t>(free);
  return plan;
}

}  // namespace engine
