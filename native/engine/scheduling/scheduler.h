// Capacity + micro-batch planning for one iteration, with TensorRT-LLM's policies. Pure: no threads, no model,
// no KV mutation — it reads a snapshot of sequence sizes and the free block count and returns a plan the
// executor then applies (allocate blocks, free paused ones, run the chunks).
//
// GUARANTEED_NO_EVICT: a request starts only if blocks for its whole lifetime (prompt + max_tokens) fit next to
//   the remaining lifetime needs of every running request; nothing is ever paused.
// MAX_UTILIZATION: a request starts as long as blocks for its current step fit. When a running sequence needs a
//   new block and none is free, the most recently started running sequences are paused (LIFO) to make room;
//   they return to the front of the queue and later recompute prompt + generated tokens as a context.
// Both: running sequences first (oldest first), then queued ones strictly FIFO (the first that does not fit stops
//   admission, so a big request is not starved by small ones behind it); max_batch_size and max_num_tokens cap
//   each iteration.
// Chunking (chunked context, or any resume): a context longer than what the iteration has left runs in chunks
//   that end on a block boundary (sizes are multiples of tokens_per_block except the last, as in TensorRT-LLM);
//   decode tokens of running sequences are set aside first, so a long prompt never stalls other decodes. When
//   that leaves a running prompt less than a block, it waits and nothing new is admitted, so the decodes drain
//   instead of newcomers starving it.
// Prefix reuse: a queued entry arrives with num_computed = its cached prefix; the prefix blocks that other
//   sequences already hold (num_shared_blocks) cost nothing, cached unreferenced ones cost a free block each.
#pragma once
#include <cstdint>
#include <vector>

#include "executor/executor.h"
#include "scheduling/request.h"

namespace engine {

struct SchedulerConfig {
  CapacitySchedulerPolicy policy = CapacitySchedulerPolicy::guaranteed_no_evict;
  int32_t max_batch_size = 1;     // sequences per iteration
  int32_t max_num_tokens = 1;     // new tokens per iteration (context chunks + one per generation sequence)
  int32_t tokens_per_block = 1;
  bool enable_chunked_context = false;  // fresh prompts may be split across iterations
  // LoRA: distinct adapters running at once (the model's slots; 0: no limit). A queued entry whose adapter would
  // be one too many waits (FIFO, like any entry that does not fit) until a running one's adapter frees its slot.
  int32_t max_loras = 0;
};

// A sequence as the scheduler sees it. Units: tokens (positions) and blocks.
struct SchedulerEntry {
  RequestId id = 0;
  int32_t num_tokens = 0;        // prompt + generated so far: the next forward must cover positions [0, num_tokens)
  int32_t num_computed = 0;      // positions whose K/V are cached; the chunk is [num_computed, num_tokens)
  int32_t num_blocks_held = 0;
  int64_t lifetime_tokens = 0;   // prompt + max_tokens
  bool in_generation = false;    // context done: this iteration feeds exactly one token
  // A sequence resumed after a pause may be split into chunks even without chunked context: its prompt +
  // generated tokens can exceed max_num_tokens, and it must still make progress.
  bool is_resume = false;
  // Queued only: blocks of the cached prefix (counted in num_computed) that running sequences already hold, so
  // attaching them takes no block from the free pool and they need no reservation.
  int32_t num_shared_blocks = 0;
  // Beam search (beam_width > 1): the beams share the prompt's full blocks and each owns the rest, so covering
  // t > prompt_len positions takes floor(prompt_len / tpb) + beam_width * (blocks(t) - floor(prompt_len / tpb))
  // blocks, a bound that includes the copy-on-write copies; a generation step feeds num_live_beams tokens. Such
  // an entry is never paused (it has no recompute path): max_utilization admits it only when its lifetime fits
  // next to the other beam requests' reservations, and pauses other sequences around it.
  int32_t beam_width = 1;
  int32_t num_live_beams = 1;
  int32_t prompt_len = 0;
  // Sliding windows (kv-window.h): the sequence releases the blocks before its window after every forward, so it
  // holds about window / tokens_per_block blocks however long it runs (0: no release; beam requests never do).
  // holds_window_only: its table was already trimmed to num_computed's window (a running sequence; a queued one
  // still attaches a whole cached prefix before its first forward).
  int32_t window = 0;
  bool holds_window_only = false;
  // Pipelined pp (executor-pipeline.cpp): its last micro-batch has not come back. It keeps its blocks and its
  // lifetime reservation, but gets no work, takes no slot, and is never paused; an older sequence that needs its
  // blocks waits for it instead.
  bool in_flight = false;
  // LoRA: the adapter it runs with (the executor's key for it; 0: the base model).
  uint64_t lora_key = 0;
};

struct ScheduledWork {
  RequestId id = 0;
  int32_t num_new_tokens = 0;    // chunk length; positions [num_computed, num_computed + num_new_tokens)
  bool is_context = false;
  bool is_new = false;           // comes from the queue (first start or resume)
};

struct SchedulePlan {
  std::vector<ScheduledWork> work;       // in batch order: running ones first, then started ones
  std::vector<RequestId> paused;         // running sequences to evict before this iteration (max_utilization)
  int32_t num_context = 0, num_generation = 0;
  int64_t num_context_tokens = 0;
  int32_t num_blocks_after = 0;          // free blocks once the plan is applied (for tests/sanity checks)
};

// running: oldest first. queued: front first (paused ones already at the front).
SchedulePlan schedule_iteration(const SchedulerConfig& config, const std::vector<SchedulerEntry>& running,
                                const std::vector<SchedulerEntry>& queued, int32_t free_blocks);

}  // namespace engine
