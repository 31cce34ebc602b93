#include "scheduling/scheduler.h"

#include <algorithm>

#include "kv-cache/kv-window.h"

namespace engine {
namespace {

int32_t blocks_for(int64_t tokens, int32_t tokens_per_block) {
  return static_cast<int32_t>(kv_blocks_for(tokens, tokens_per_block));
}

// Blocks covering `tokens` positions of `e`, all its beams together (see SchedulerEntry::beam_width), or, for a
// windowed one, those of its window.
int64_t entry_blocks_for(const SchedulerEntry& e, int64_t tokens, int32_t tokens_per_block) {
  if (e.window > 0 && e.holds_window_only) return kv_blocks_held(tokens, e.num_computed, e.window, tokens_per_block);
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
  // A windowed sequence's recompute after a pause runs in chunks no longer than its prompt, so it never holds more
  // blocks than kv_lifetime_blocks (what admission and validation counted).
  if (e.window > 0 && e.is_resume && !e.in_generation)
    tokens_left = std::min<int64_t>(tokens_left, std::max(e.prompt_len, std::max(1, config.tokens_per_block)));
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

// decodes_from[i]: decode tokens of the running generation entries (not in flight) at index >= i, so the ones after a
// context entry can be set aside before its chunk is sized (in O(1) per entry).
std::vector<int64_t> decode_suffix_sums(const std::vector<SchedulerEntry>& running) {
  std::vector<int64_t> sums(running.size() + 1, 0);
  for (size_t i = running.size(); i-- > 0;)
    sums[i] = sums[i + 1] + (running[i].in_generation && !running[i].in_flight ? std::max(1, running[i].num_live_beams) : 0);
  return sums;
}

// One plan in the making: the budgets left, and the work added so far.
class PlanBuilder {
 public:
  PlanBuilder(const SchedulerConfig& config, const std::vector<SchedulerEntry>& running, int32_t free_blocks)
      : config_(config),
        running_(running),
        tpb_(std::max(1, config.tokens_per_block)),
        tokens_left_(config.max_num_tokens),
        slots_left_(config.max_batch_size),
        free_(free_blocks),
        decodes_from_(decode_suffix_sums(running)) {
    for (const SchedulerEntry& e : running)
      if (e.lora_key != 0 && std::find(adapters_.begin(), adapters_.end(), e.lora_key) == adapters_.end())
        adapters_.push_back(e.lora_key);
  }

  SchedulePlan guaranteed_no_evict(const std::vector<SchedulerEntry>& queued);
  SchedulePlan max_utilization(const std::vector<SchedulerEntry>& queued);

 private:
  // Blocks `e` still has to take from the free pool to cover `tokens` positions.
  int64_t blocks_to_take(const SchedulerEntry& e, int64_t tokens) const {
    return std::max<int64_t>(0, entry_blocks_for(e, tokens, tpb_) - e.num_blocks_held - e.num_shared_blocks);
  }
  // Blocks `e` may still take over its whole lifetime (a windowed one: up to the most it holds at once; its
  // chunks are prompt chunks and single decode tokens, as nothing is paused under this policy).
  int64_t lifetime_to_take(const SchedulerEntry& e) const {
    if (e.window <= 0) return blocks_to_take(e, e.lifetime_tokens);
    const int64_t most = kv_lifetime_blocks(e.lifetime_tokens, e.prompt_len, e.window, tpb_);
    return std::max<int64_t>(0, most - e.num_blocks_held - e.num_shared_blocks);
  }
  // Running entry i's budget: what is left minus the decodes still to come after it, up to `end`.
  int64_t running_budget(size_t i, size_t end) const {
    return tokens_left_ - (running_[i].in_generation ? 0 : decodes_from_[i + 1] - decodes_from_[end]);
  }
  void add(const SchedulerEntry& e, int32_t n, bool is_new);
  // A queued entry's adapter is running already, or a slot is left for it (max_loras).
  bool adapter_fits(const SchedulerEntry& e) const {
    if (e.lora_key == 0 || config_.max_loras <= 0) return true;
    if (std::find(adapters_.begin(), adapters_.end(), e.lora_key) != adapters_.end()) return true;
    return static_cast<int32_t>(adapters_.size()) < config_.max_loras;
  }
  // max_utilization: makes room for running entry i's chunk by pausing from `end` down (most recently started
  // first). False: the entry does not run (it paused itself, then `end` = i, or it waits as a beam request).
  bool make_room(size_t i, int64_t need, size_t& end);
  void admit_max_utilization(const std::vector<SchedulerEntry>& queued);

  const SchedulerConfig& config_;
  const std::vector<SchedulerEntry>& running_;
  const int32_t tpb_;
  int64_t tokens_left_;
  int32_t slots_left_;
  int64_t free_;
  const std::vector<int64_t> decodes_from_;
  int64_t taken_ = 0;  // blocks the planned chunks take from the free pool this iteration
  // A running context got no chunk (less than a block of budget left after the decodes): nothing new starts,
  // so the decodes drain and newcomers' decodes cannot starve it forever.
  bool chunk_waiting_ = false;
  std::vector<uint64_t> adapters_;  // distinct LoRA adapters of the running entries and those admitted
  SchedulePlan plan_;
};

void PlanBuilder::add(const SchedulerEntry& e, int32_t n, bool is_new) {
  taken_ += blocks_to_take(e, e.num_computed + n);
  ScheduledWork w;
  w.id = e.id;
  w.num_new_tokens = n;
  w.is_context = !e.in_generation;
  w.is_new = is_new;
  plan_.work.push_back(w);
  if (is_new && e.lora_key != 0 && std::find(adapters_.begin(), adapters_.end(), e.lora_key) == adapters_.end())
    adapters_.push_back(e.lora_key);
  tokens_left_ -= tokens_fed(e, n);
  --slots_left_;
  if (w.is_context) {
    ++plan_.num_context;
    plan_.num_context_tokens += n;
  } else {
    ++plan_.num_generation;
  }
}

SchedulePlan PlanBuilder::guaranteed_no_evict(const std::vector<SchedulerEntry>& queued) {
  // Reserve what every running sequence can still grow to; admission only spends what is left.
  int64_t reserved = 0;
  for (const SchedulerEntry& e : running_) reserved += lifetime_to_take(e);
  for (size_t i = 0; i < running_.size(); ++i) {
    const SchedulerEntry& e = running_[i];
    if (e.in_flight) continue;
    if (slots_left_ <= 0) break;
    const int32_t n = chunk_length(config_, e, running_budget(i, running_.size()));
    if (n == 0) {  // over the token budget: stays running, holds its blocks, runs next iteration
      chunk_waiting_ |= !e.in_generation;
      continue;
    }
    add(e, n, false);
  }
  int64_t available = free_ - reserved;
  for (const SchedulerEntry& e : queued) {
    if (chunk_waiting_) break;
    if (slots_left_ <= 0) break;
    if (!adapter_fits(e)) break;
    // A shared prefix block is already counted (once) in the pool's use; only the rest is reserved.
    const int64_t lifetime = lifetime_to_take(e);
    if (lifetime > available) break;
    const int32_t n = chunk_length(config_, e, tokens_left_);
    if (n == 0) break;
    available -= lifetime;
    add(e, n, true);
  }
  // Only this iteration's blocks are taken now; the rest of each reservation is taken as sequences grow.
  plan_.num_blocks_after = static_cast<int32_t>(free_ - taken_);
  return plan_;
}

bool PlanBuilder::make_room(size_t i, int64_t need, size_t& end) {
  const SchedulerEntry& e = running_[i];
  bool behind_in_flight = false;
  while (need > free_ && end > i + 1) {
    --end;
    // Never paused: it just does not run this iteration (a beam request), or it is still in the pipeline.
    if (running_[end].beam_width > 1) continue;
    if (running_[end].in_flight) {
      behind_in_flight = true;
      continue;
    }
    plan_.paused.push_back(running_[end].id);
    free_ += running_[end].num_blocks_held;
  }
  // A beam request is never paused: it waits, holding its blocks, for older sequences to free some. Nor does one
  // pause itself while a younger one in flight holds blocks it could take once that one is back.
  if (need > free_ && (e.beam_width > 1 || behind_in_flight)) return false;
  if (need > free_) {  // it is itself the most recent one left: pause it
    plan_.paused.push_back(e.id);
    free_ += e.num_blocks_held;
    end = i;
    return false;
  }
  return true;
}

SchedulePlan PlanBuilder::max_utilization(const std::vector<SchedulerEntry>& queued) {
  // `end` shrinks as sequences are paused from the back (most recently started first).
  size_t end = running_.size();
  for (size_t i = 0; i < end; ++i) {
    const SchedulerEntry& e = running_[i];
    if (e.in_flight) continue;
    if (slots_left_ <= 0) break;
    const int32_t n = chunk_length(config_, e, running_budget(i, end));
    if (n == 0) {
      chunk_waiting_ |= !e.in_generation;
      continue;
    }
    const int64_t need = blocks_to_take(e, e.num_computed + n);
    if (!make_room(i, need, end)) {
      if (end == i) break;  // paused itself: nothing after it runs
      continue;
    }
    free_ -= need;
    add(e, n, false);
  }
  // Nothing new starts in an iteration that had to evict: the pool is full, and a paused sequence must not be
  // overtaken by a newcomer.
  if (plan_.paused.empty() && !chunk_waiting_) admit_max_utilization(queued);
  plan_.num_blocks_after = static_cast<int32_t>(free_);
  return plan_;
}

void PlanBuilder::admit_max_utilization(const std::vector<SchedulerEntry>& queued) {
  // Beam requests cannot be paused, so two of them must never wait on each other: one starts only when its
  // whole lifetime fits next to what the running ones can still grow to (other sequences are paused for them).
  int64_t beam_reserved = 0;
  for (const SchedulerEntry& r : running_)
    if (r.beam_width > 1) beam_reserved += blocks_to_take(r, r.lifetime_tokens);
  for (const SchedulerEntry& e : queued) {
    if (slots_left_ <= 0) break;
    if (!adapter_fits(e)) break;
    const int32_t n = chunk_length(config_, e, tokens_left_);
    if (n == 0) break;
    const int64_t need = blocks_to_take(e, e.num_computed + n);
    if (need > free_) break;
    if (e.beam_width > 1) {
      const int64_t lifetime = blocks_to_take(e, e.lifetime_tokens);
      if (lifetime > free_ - beam_reserved) break;
      beam_reserved += lifetime;
    }
    free_ -= need;
    add(e, n, true);
  }
}

}  // namespace

SchedulePlan schedule_iteration(const SchedulerConfig& config, const std::vector<SchedulerEntry>& running,
                                const std::vector<SchedulerEntry>& queued, int32_t free_blocks) {
  PlanBuilder builder(config, running, free_blocks);
  return config.policy == CapacitySchedulerPolicy::guaranteed_no_evict ? builder.guaranteed_no_evict(queued)
                                                                       : builder.max_utilization(queued);
}

}  // namespace engine
