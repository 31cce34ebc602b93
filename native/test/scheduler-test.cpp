// schedule_iteration as a pure function: batch size and token budget, no-evict lifetime admission, and
// max_utilization pausing the most recently started sequences and resuming them (chunked when too long).
#include <algorithm>

#include "check.h"
#include "scheduling/scheduler.h"

using namespace engine;

static SchedulerEntry queued_entry(RequestId id, int32_t prompt, int32_t max_tokens) {
  SchedulerEntry e;
  e.id = id;
  e.num_tokens = prompt;
  e.lifetime_tokens = prompt + max_tokens;
  return e;
}

static SchedulerEntry gen_entry(RequestId id, int32_t num_tokens, int32_t blocks_held, int64_t lifetime) {
  SchedulerEntry e;
  e.id = id;
  e.num_tokens = num_tokens;
  e.num_computed = num_tokens - 1;
  e.num_blocks_held = blocks_held;
  e.lifetime_tokens = lifetime;
  e.in_generation = true;
  return e;
}

static SchedulerConfig cfg(CapacitySchedulerPolicy policy, int32_t batch, int32_t tokens, int32_t tpb) {
  SchedulerConfig c;
  c.policy = policy;
  c.max_batch_size = batch;
  c.max_num_tokens = tokens;
  c.tokens_per_block = tpb;
  return c;
}

static bool has(const std::vector<RequestId>& v, RequestId id) { return std::find(v.begin(), v.end(), id) != v.end(); }

static void test_batch_size_and_token_budget() {
  auto c = cfg(CapacitySchedulerPolicy::guaranteed_no_evict, 2, 100, 4);
  std::vector<SchedulerEntry> q = {queued_entry(1, 10, 5), queued_entry(2, 10, 5), queued_entry(3, 10, 5)};
  auto plan = schedule_iteration(c, {}, q, 100);
  CHECK(plan.work.size() == 2);  // max_batch_size
  CHECK(plan.work[0].id == 1 && plan.work[1].id == 2);
  CHECK(plan.num_context == 2 && plan.num_context_tokens == 20);
  CHECK(plan.work[0].is_new && plan.work[0].is_context && plan.work[0].num_new_tokens == 10);

  c.max_batch_size = 8;
  c.max_num_tokens = 25;
  plan = schedule_iteration(c, {}, q, 100);
  CHECK(plan.work.size() == 2);  // 10 + 10 fit, the third (10) would make 30 > 25; FIFO stops there
  CHECK(plan.num_context_tokens == 20);

  // Generation sequences cost one token each and come first.
  std::vector<SchedulerEntry> r = {gen_entry(7, 12, 3, 20), gen_entry(8, 12, 3, 20)};
  c.max_num_tokens = 12;
  plan = schedule_iteration(c, r, q, 100);
  CHECK(plan.work.size() == 3);
  CHECK(plan.work[0].id == 7 && plan.work[1].id == 8 && plan.work[2].id == 1);
  CHECK(plan.num_generation == 2 && plan.num_context == 1);
  CHECK(!plan.work[0].is_context && plan.work[0].num_new_tokens == 1);
}

static void test_no_evict_reserves_lifetimes() {
  auto c = cfg(CapacitySchedulerPolicy::guaranteed_no_evict, 8, 1000, 4);
  // Running: lifetime 40 tokens = 10 blocks, holds 3 -> reserves 7 more. Free 12 -> 5 available for admission.
  std::vector<SchedulerEntry> r = {gen_entry(1, 12, 3, 40)};
  std::vector<SchedulerEntry> q = {queued_entry(2, 8, 12) /* 20 tokens = 5 blocks */, queued_entry(3, 1, 3) /* 1 block */};
  auto plan = schedule_iteration(c, r, q, 12);
  CHECK(plan.work.size() == 2);  // running + request 2 (exactly 5 blocks); request 3 does not fit any more
  CHECK(plan.work[1].id == 2);
  CHECK(plan.paused.empty());
  CHECK(plan.num_blocks_after == 10);  // only request 2's 2 prompt blocks are taken now

  // One block less: request 2 no longer fits, and FIFO means 3 does not overtake it.
  plan = schedule_iteration(c, r, q, 11);
  CHECK(plan.work.size() == 1);
  CHECK(plan.work[0].id == 1);
  CHECK(plan.paused.empty());

  // Even with zero free blocks no-evict never pauses (its reservations guarantee growth).
  plan = schedule_iteration(c, r, q, 0);
  CHECK(plan.paused.empty());
}

static void test_max_utilization_admits_for_current_step() {
  auto c = cfg(CapacitySchedulerPolicy::max_utilization, 8, 1000, 4);
  std::vector<SchedulerEntry> r = {gen_entry(1, 12, 3, 40)};  // 12 tokens in 3 blocks: next step needs none
  std::vector<SchedulerEntry> q = {queued_entry(2, 8, 100)};   // needs 2 blocks now, 27 over its lifetime
  auto plan = schedule_iteration(c, r, q, 2);
  CHECK(plan.work.size() == 2);
  CHECK(plan.paused.empty());
  CHECK(plan.num_blocks_after == 0);
}

static void test_max_utilization_pauses_lifo() {
  auto c = cfg(CapacitySchedulerPolicy::max_utilization, 8, 1000, 4);
  // Three running, oldest first; all at a block boundary (13 tokens need a 4th block), nothing free.
  std::vector<SchedulerEntry> r = {gen_entry(1, 13, 3, 40), gen_entry(2, 13, 3, 40), gen_entry(3, 13, 3, 40)};
  std::vector<SchedulerEntry> q = {queued_entry(9, 2, 2)};
  auto plan = schedule_iteration(c, r, q, 0);
  // 1 needs a block: pause 3 (most recent) -> 3 free; 1 takes one, 2 takes one, 1 left; nothing new starts.
  CHECK(plan.paused.size() == 1);
  CHECK(has(plan.paused, 3));
  CHECK(plan.work.size() == 2);
  CHECK(plan.work[0].id == 1 && plan.work[1].id == 2);
  CHECK(plan.num_blocks_after == 1);

  // Running sequences hold 1 block each and all need a second one; nothing free: pause from the back until the
  // survivors fit.
  std::vector<SchedulerEntry> r2 = {gen_entry(1, 5, 1, 40), gen_entry(2, 5, 1, 40), gen_entry(3, 5, 1, 40)};
  plan = schedule_iteration(c, r2, {}, 0);
  // 1 needs 1: pause 3 (+1). 2 needs 1: nothing free, pause 2 itself (it is the most recent left).
  CHECK(plan.paused.size() == 2);
  CHECK(plan.paused[0] == 3 && plan.paused[1] == 2);
  CHECK(plan.work.size() == 1 && plan.work[0].id == 1);
}

// Pipelined pp: a sequence whose micro-batch is in flight gets no work and no slot, is never paused, still holds
// its reservation (guaranteed_no_evict), and an older one that would need its blocks waits instead of pausing itself.
static void test_in_flight_entries() {
  auto mu = cfg(CapacitySchedulerPolicy::max_utilization, 2, 1000, 4);
  std::vector<SchedulerEntry> r = {gen_entry(1, 13, 3, 40), gen_entry(2, 13, 3, 40), gen_entry(3, 13, 3, 40)};
  r[1].in_flight = true;
  // Room for everyone: 1 and 3 run (2 is in flight and takes no slot of the 2).
  auto plan = schedule_iteration(mu, r, {}, 4);
  CHECK(plan.work.size() == 2 && plan.work[0].id == 1 && plan.work[1].id == 3);
  CHECK(plan.paused.empty());
  // Nothing free: 1 needs a block; 3 (not in flight) is paused for it, 2 never is.
  plan = schedule_iteration(mu, r, {}, 0);
  CHECK(plan.paused.size() == 1 && plan.paused[0] == 3);
  CHECK(plan.work.size() == 1 && plan.work[0].id == 1);
  // Only in-flight ones behind 1: it waits (neither runs nor pauses itself).
  r[2].in_flight = true;
  plan = schedule_iteration(mu, r, {}, 0);
  CHECK(plan.paused.empty() && plan.work.empty());

  // guaranteed_no_evict: the in-flight one's lifetime is still reserved, so the newcomer does not fit.
  auto ne = cfg(CapacitySchedulerPolicy::guaranteed_no_evict, 8, 1000, 4);
  std::vector<SchedulerEntry> r2 = {gen_entry(1, 12, 3, 40)};  // 40 tokens = 10 blocks: 7 more to take
  r2[0].in_flight = true;
  plan = schedule_iteration(ne, r2, {queued_entry(2, 8, 12)}, 10);  // 5 blocks more than the 3 left
  CHECK(plan.work.empty());
  plan = schedule_iteration(ne, r2, {queued_entry(2, 4, 8)}, 10);  // 3 blocks: fits next to the reservation
  CHECK(plan.work.size() == 1 && plan.work[0].id == 2);
}

static void test_resume_recomputes_and_chunks() {
  auto c = cfg(CapacitySchedulerPolicy::max_utilization, 8, 16, 4);
  // A paused request: prompt 10 + 8 generated = 18 tokens, none computed. Longer than max_num_tokens (16), so it
  // resumes in chunks (a fresh prompt this long would have been rejected at enqueue).
  SchedulerEntry e = queued_entry(5, 18, 10);
  e.lifetime_tokens = 20;
  e.is_resume = true;
  auto plan = schedule_iteration(c, {}, {e}, 10);
  CHECK(plan.work.size() == 1);
  CHECK(plan.work[0].is_new && plan.work[0].is_context);
  CHECK(plan.work[0].num_new_tokens == 16);
  CHECK(plan.num_blocks_after == 10 - 4);

  // Second chunk (it is running now, context not done): the remaining 2 tokens.
  SchedulerEntry run = e;
  run.num_computed = 16;
  run.num_blocks_held = 4;
  plan = schedule_iteration(c, {run}, {}, 6);
  CHECK(plan.work.size() == 1 && plan.work[0].num_new_tokens == 2 && plan.work[0].is_context);

  // Not a resume and no chunked context: a prompt over the remaining budget waits.
  SchedulerEntry fresh = queued_entry(6, 12, 4);
  std::vector<SchedulerEntry> gens = {gen_entry(1, 5, 2, 40), gen_entry(2, 5, 2, 40), gen_entry(3, 5, 2, 40),
                                      gen_entry(4, 5, 2, 40), gen_entry(7, 5, 2, 40)};
  plan = schedule_iteration(c, gens, {fresh}, 100);
  CHECK(plan.work.size() == 5);  // 5 gen tokens + 12 > 16
  c.enable_chunked_context = true;
  plan = schedule_iteration(c, gens, {fresh}, 100);
  // 11 tokens left, but chunks end on a block boundary (TensorRT-LLM's chunk unit): 8.
  CHECK(plan.work.size() == 6 && plan.work[5].num_new_tokens == 8);
}

static void test_chunks_leave_room_for_decodes() {
  auto c = cfg(CapacitySchedulerPolicy::guaranteed_no_evict, 8, 16, 4);
  c.enable_chunked_context = true;
  // A running context (started first, 30 of 50 tokens to go) ahead of two decodes: its chunk leaves them their
  // two tokens and ends on a block boundary: 16 - 2 = 14 -> 12.
  SchedulerEntry ctx = queued_entry(1, 50, 4);
  ctx.num_computed = 20;
  ctx.num_blocks_held = 5;
  std::vector<SchedulerEntry> r = {ctx, gen_entry(2, 9, 3, 20), gen_entry(3, 9, 3, 20)};
  auto plan = schedule_iteration(c, r, {}, 100);
  CHECK(plan.work.size() == 3);
  CHECK(plan.work[0].id == 1 && plan.work[0].num_new_tokens == 12);
  CHECK(plan.num_context_tokens + plan.num_generation <= 16);
  // Its last chunk need not be aligned: 6 left.
  r[0].num_computed = 44;
  r[0].num_blocks_held = 11;
  plan = schedule_iteration(c, r, {}, 100);
  CHECK(plan.work[0].num_new_tokens == 6 && plan.work.size() == 3);
  // Under a block of budget left: a chunked prompt waits instead of running an unaligned piece.
  c.max_num_tokens = 5;
  std::vector<SchedulerEntry> q = {queued_entry(9, 3, 2)};
  plan = schedule_iteration(c, r, q, 100);
  CHECK(plan.work.size() == 2 && plan.work[0].id == 2);
  // ... and the 3-token newcomer that would fit is held back, so decodes drain and the prompt gets its block.
  CHECK(plan.work[1].id == 3);
}

static void test_shared_prefix_blocks_are_free() {
  // A queued prompt of 14 tokens whose first 12 are cached: 8 of them in blocks running sequences hold (shared,
  // free of charge), 4 in a cached unreferenced block (takes one free block). Lifetime 14 + 6 = 20 tokens = 5
  // blocks, of which 2 shared -> 3 to reserve; the chunk covers positions [12, 14).
  auto c = cfg(CapacitySchedulerPolicy::guaranteed_no_evict, 8, 64, 4);
  SchedulerEntry e = queued_entry(4, 14, 6);
  e.num_computed = 12;
  e.num_shared_blocks = 2;
  auto plan = schedule_iteration(c, {}, {e}, 3);
  CHECK(plan.work.size() == 1 && plan.work[0].num_new_tokens == 2);
  CHECK(plan.num_context_tokens == 2);
  CHECK(plan.num_blocks_after == 3 - 2);  // the cached block re-attached + 1 new for positions 12, 13
  plan = schedule_iteration(c, {}, {e}, 2);
  CHECK(plan.work.empty());  // lifetime needs 3
  c.policy = CapacitySchedulerPolicy::max_utilization;
  plan = schedule_iteration(c, {}, {e}, 2);
  CHECK(plan.work.size() == 1 && plan.num_blocks_after == 0);  // only the current step must fit
}

// LoRA: no more distinct adapters run at once than max_loras; a queued entry whose adapter would be one too many
// waits (FIFO: those behind it too), one whose adapter already runs or the base model does not.
static void test_max_loras() {
  for (auto policy : {CapacitySchedulerPolicy::guaranteed_no_evict, CapacitySchedulerPolicy::max_utilization}) {
    auto c = cfg(policy, 8, 1000, 4);
    c.max_loras = 2;
    auto with = [](SchedulerEntry e, uint64_t key) {
      e.lora_key = key;
      return e;
    };
    std::vector<SchedulerEntry> r = {with(gen_entry(1, 12, 3, 20), 10)};
    std::vector<SchedulerEntry> q = {with(queued_entry(2, 8, 4), 10), queued_entry(3, 8, 4),
                                     with(queued_entry(4, 8, 4), 20), with(queued_entry(5, 8, 4), 30),
                                     with(queued_entry(6, 8, 4), 20)};
    auto plan = schedule_iteration(c, r, q, 100);
    std::vector<RequestId> ids;
    for (const auto& w : plan.work) ids.push_back(w.id);
    CHECK((ids == std::vector<RequestId>{1, 2, 3, 4}));  // 5 (a third adapter) waits, and 6 behind it
    c.max_loras = 0;
    plan = schedule_iteration(c, r, q, 100);
    CHECK(plan.work.size() == 6);  // no limit
    c.max_loras = 1;
    plan = schedule_iteration(c, {}, {with(queued_entry(7, 8, 4), 20), with(queued_entry(8, 8, 4), 30)}, 100);
    CHECK(plan.work.size() == 1 && plan.work[0].id == 7);
  }
}

TEST_MAIN({
  test_max_loras();
  test_batch_size_and_token_budget();
  test_no_evict_reserves_lifetimes();
  test_max_utilization_admits_for_current_step();
  test_max_utilization_pauses_lifo();
  test_in_flight_entries();
  test_resume_recomputes_and_chunks();
  test_chunks_leave_room_for_decodes();
  test_shared_prefix_blocks_are_free();
})
