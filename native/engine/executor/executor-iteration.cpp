// One iteration of the executor loop, as named steps: plan (scheduler.h) -> apply pauses -> start the admitted
// sequences -> build their chunks (KV blocks allocated) -> one Model::forward over every chunk, its output's shape
// checked -> sample and update (executor-sample.cpp) -> stats and delivery.
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "executor/executor-impl.h"
#include "kv-cache/kv-block-hash.h"
#include "sampling/device-sampling-choice.h"
#include "sampling/guided-masks.h"

namespace engine {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t final_responses(const std::vector<Response>& out) {
  return std::count_if(out.begin(), out.end(), [](const Response& r) { return r.result.is_final; });
}

namespace {

// Leading tokens a (re)starting sequence may take from the prefix cache instead of computing. Never its last
// token: its logits row drives the next sample. With return_context_logits, never a prompt token whose logits row
// it does not have yet (TensorRT-LLM turns reuse off for such requests; limiting it to the rows already collected
// keeps the logits exact and still lets a paused request that finished its prompt reuse on resume).
int32_t reusable_tokens(const Sequence& s, int32_t vocab) {
  int32_t n = s.num_tokens() - 1;
  const int32_t rows = s.context_logits_rows(vocab);
  if (s.request.output.return_context_logits && rows < s.prompt_len) n = std::min(n, rows);
  return std::max(0, n);
}

// What the scheduler needs to know of a sequence.
SchedulerEntry scheduler_entry(const Sequence& s) {
  SchedulerEntry e;
  e.id = s.id;
  e.num_tokens = s.num_tokens();
  e.num_computed = s.num_computed;
  e.num_blocks_held = KvCacheManager::blocks_held(s.block_table);
  e.lifetime_tokens = s.lifetime_tokens();
  e.prompt_len = s.prompt_len;
  e.window = s.release_window;
  e.holds_window_only = s.state == SequenceState::context || s.state == SequenceState::generation;
  e.in_generation = s.state == SequenceState::generation;
  e.is_resume = s.num_generated() > 0;
  e.in_flight = s.in_flight;
  e.lora_key = s.lora.key;
  if (s.is_beam_search()) {
    e.num_blocks_held = beam_blocks_held(s);
    e.beam_width = s.request.sampling.beam_width;
    e.num_live_beams = std::max<int32_t>(1, static_cast<int32_t>(s.beams.size()));
    e.prompt_len = s.prompt_len;
  }
  return e;
}

// Empty when `fo` has the shape `chunks` ask for, else what is wrong. Checked before any row index is trusted.
std::string forward_shape_error(const std::vector<SequenceChunk>& chunks, const ForwardOutput& fo, int32_t vocab) {
  size_t rows = 0;
  bool sampled_ok = true;
  for (size_t i = 0; i < chunks.size() && i < fo.first_row.size(); ++i) {
    const SequenceChunk& c = chunks[i];
    if (fo.first_row[i] < 0) {  // sampled on the device: only where asked, with the token present
      sampled_ok = sampled_ok && c.sample_on != SampleOn::host && fo.sampled.size() == chunks.size();
      if (c.all_logits)  // every row's argmax
        sampled_ok = sampled_ok && fo.first_sample.size() == chunks.size() && fo.first_sample[i] >= 0 &&
                     static_cast<size_t>(fo.first_sample[i]) + c.tokens.size() <= fo.row_samples.size();
      continue;
    }
    rows += c.all_logits ? c.tokens.size() : 1;
  }
  if (fo.vocab_size == vocab && fo.first_row.size() == chunks.size() && sampled_ok &&
      fo.logits.size() >= rows * static_cast<size_t>(vocab))
    return {};
  return "model returned logits of an unexpected shape (vocab " + std::to_string(fo.vocab_size) + ", " +
         std::to_string(fo.logits.size()) + " values for " + std::to_string(rows) + " rows)";
}

}  // namespace

void Executor::Impl::run_iteration(std::vector<Response>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const double timestamp = unix_now();
  const SchedulePlan plan = plan_iteration();
  phases.begin(plan.num_context == 0 && plan.num_generation > 0);
  apply_pauses(plan);
  start_admitted(plan);
  IterationBatch batch = build_chunks(plan, out);
  phases.add(IterPhase::plan, t0);
  const int32_t num_scheduled = static_cast<int32_t>(batch.seqs.size());
  bool forward_ran = false;
  if (!batch.empty()) {
    ForwardOutput fo;
    auto t = IterationPhases::Clock::now();
    forward_ran = run_forward(batch, fo, out);
    phases.add(IterPhase::forward, t);
    t = IterationPhases::Clock::now();
    if (forward_ran) sample_and_update(batch, fo, out);
    phases.add(IterPhase::update, t);
  }
  const auto t_deliver = IterationPhases::Clock::now();
  if (plan.work.empty() && plan.paused.empty() && final_responses(out) == 0) {
    // Nothing could run (should not happen: the oldest running sequence always fits). Avoid a hot spin. (Nothing to
    // run because every queued request waits for its guide's masks is no such case: the loop then sleeps until
    // woken.)
    if (running.empty() && !queue_has_ready()) return;
    std::unique_lock<std::mutex> lock(mu);
    wake.wait_for(lock, std::chrono::milliseconds(1));
    return;
  }
  IterationStats stats = collect_stats(plan, num_scheduled, forward_ran, t0, timestamp, out);
  deliver(std::move(out), &stats);
  out.clear();
  phases.add(IterPhase::deliver, t_deliver);
}

SchedulePlan Executor::Impl::plan_iteration(int32_t max_batch_size, int32_t max_num_tokens) {
  std::vector<SchedulerEntry> running_entries, queued_entries;
  for (const Sequence* s : running) running_entries.push_back(scheduler_entry(*s));
  // The scheduler sees the queue without the guided requests still waiting for their guide's masks, so those
  // behind them are admitted as if they were not there (executor-guide-wait.cpp).
  std::vector<const Sequence*> ready;
  for (const Sequence* s : queue)
    if (!awaits_masks(*s)) ready.push_back(s);
  for (const Sequence* s : ready) queued_entries.push_back(scheduler_entry(*s));
  if (kv.reuse_enabled()) {
    // What each queued sequence would find cached. Only the first max_batch_size can start this iteration, so
    // only those pay for the lookup.
    const size_t n = std::min(ready.size(), static_cast<size_t>(scheduler_config.max_batch_size));
    for (size_t i = 0; i < n; ++i) {
      SchedulerEntry& e = queued_entries[i];
      e.num_computed = kv.probe_prefix(ready[i]->tokens, reusable_tokens(*ready[i], vocab_size), &e.num_shared_blocks,
                                       ready[i]->kv_root());
    }
  }
  SchedulerConfig config = scheduler_config;
  if (max_batch_size >= 0) config.max_batch_size = max_batch_size;
  if (max_num_tokens >= 0) config.max_num_tokens = max_num_tokens;
  return schedule_iteration(config, running_entries, queued_entries, kv.num_free_blocks());
}

void Executor::Impl::apply_pauses(const SchedulePlan& plan) {
  // Back to the front of the queue in their original start order, so the oldest paused one resumes first.
  std::vector<Sequence*> paused;
  for (RequestId id : plan.paused) paused.push_back(live.at(id).get());
  std::sort(paused.begin(), paused.end(), [](const Sequence* a, const Sequence* b) { return a->start_order < b->start_order; });
  for (auto it = paused.rbegin(); it != paused.rend(); ++it) {
    Sequence* s = *it;
    kv.release(s->block_table);
    release_draft(*s);
    s->num_computed = 0;
    s->state = SequenceState::paused;
    erase_ptr(running, s);
    queue.push_front(s);
  }
}

void Executor::Impl::start_admitted(const SchedulePlan& plan) {
  const double t_sched = now();
  // Attach the cached prefixes of starting sequences before any block is allocated: allocation may evict cached
  // blocks, and the plan counted on these. Same state as the probe in plan_iteration, so the same chains are found.
  for (const ScheduledWork& w : plan.work) {
    if (!w.is_new) continue;
    Sequence* s = live.at(w.id).get();
    s->num_computed =
        kv.attach_prefix(s->block_table, s->tokens, reusable_tokens(*s, vocab_size), s->kv_root());
  }
  // The admitted ones are the first entries of the queue (FIFO) that do not wait for masks.
  for (const ScheduledWork& w : plan.work) {
    if (!w.is_new) continue;
    Sequence* s = live.at(w.id).get();
    erase_ptr(queue, s);
    s->state = SequenceState::context;
    s->start_order = next_start_order++;
    running.push_back(s);
    if (!s->ever_scheduled) {
      s->ever_scheduled = true;
      s->first_scheduled_time = t_sched;
      std::lock_guard<std::mutex> lock(mu);
      --num_queued;
    }
  }
}

IterationBatch Executor::Impl::build_chunks(const SchedulePlan& plan, std::vector<Response>& out) {
  IterationBatch b;
  const bool device = model->samples_on_device();
  for (const ScheduledWork& w : plan.work) {
    Sequence* s = live.at(w.id).get();
    if (!s->beams.empty()) {  // beam search in generation: one chunk per live beam, no context rows
      const size_t before = b.seqs.size();
      if (!add_beam_chunks(*s, b)) {
        b.seqs.resize(before);
        b.chunks.resize(before);
        b.ctx_rows_from.resize(before);
        b.ctx_rows_to.resize(before);
        fail_sequence(*s, ErrorCode::internal, "KV cache: no free block for a beam of a scheduled sequence (scheduler bug)", out);
      }
      continue;
    }
    const int32_t end = std::min(s->num_tokens(), s->num_computed + w.num_new_tokens);
    if (!kv.ensure_capacity(s->block_table, end)) {
      fail_sequence(*s, ErrorCode::internal, "KV cache: no free block for a scheduled sequence (scheduler bug)", out);
      continue;
    }
    SequenceChunk c;
    c.tokens.assign(s->tokens.begin() + s->num_computed, s->tokens.begin() + end);
    c.past_len = s->num_computed;
    c.block_ids = s->block_table;
    c.window = s->window_cap;
    c.prompt_table = s->request.prompt_table;  // p-tuning: the prompt's virtual tokens embed from it
    int32_t from = std::max(s->num_computed, s->context_logits_rows(vocab_size));
    int32_t to = std::min(end, s->prompt_len);
    c.all_logits = s->request.output.return_context_logits && from < to;
    if (!c.all_logits) from = to = 0;
    // EAGLE heads read the model's hidden state at every position, the prompt's too: a row each.
    if (c.tokens.size() > 1 && eagle_may_draft(*s) && eagle_takes_chunk(*s, c)) c.all_logits = true;
    choose_device_sampling(*s, device, c);
    b.seqs.push_back(s);
    b.chunks.push_back(std::move(c));
    b.ctx_rows_from.push_back(from);
    b.ctx_rows_to.push_back(to);
  }
  assign_lora_slots(b, out);
  add_drafts(b);
  return b;
}

bool Executor::Impl::run_forward(IterationBatch& batch, ForwardOutput& fo, std::vector<Response>& out,
                                 ForwardCall call) {
  std::string error;
  ErrorCode error_code = ErrorCode::internal;
  // The guided device rows' masks: during a whole pass, by the model once the layers are enqueued (overlapping the
  // device's work; guided-masks.h); before a pipelined micro-batch begins, here.
  guided_no_token.assign(batch.chunks.size(), 0);
  try {
    if (call == ForwardCall::begin) {
      fill_guided_masks(batch.seqs, batch.chunks);
      model->forward_begin(batch.chunks);
      return true;
    }
    if (call == ForwardCall::end) {
      model->forward_end(fo);
    } else {
      const auto t_forward = IterationPhases::Clock::now();
      auto t_prep_end = t_forward;
      model->set_sampling_prep([this, &batch, t_forward, &t_prep_end] {
        const auto t = IterationPhases::Clock::now();
        phases.add(IterPhase::to_prep, t_forward);
        fill_guided_masks(batch.seqs, batch.chunks, &guided_no_token);
        phases.add(IterPhase::prep, t);
        t_prep_end = IterationPhases::Clock::now();
      });
      model->forward(batch.chunks, fo);
      phases.add(IterPhase::after_prep, t_prep_end);
    }
    error = forward_shape_error(batch.chunks, fo, vocab_size);
  } catch (const EngineError& e) {
    error = e.what();
    error_code = e.code();
  } catch (const std::exception& e) {
    error = e.what();
  }
  model->set_sampling_prep(nullptr);  // run by the pass, or not needed (no device rows), or the pass failed first
  if (error.empty()) return true;
  // Only this batch is affected: its requests get error responses and their blocks back; the queue keeps going.
  for (Sequence* s : batch.seqs)
    if (!s->is_finished()) fail_sequence(*s, error_code, "forward pass failed: " + error, out);
  return false;
}

IterationStats Executor::Impl::collect_stats(const SchedulePlan& plan, int32_t num_scheduled, bool forward_ran,
                                             std::chrono::steady_clock::time_point t0, double timestamp,
                                             const std::vector<Response>& out) {
  IterationStats stats;
  stats.timestamp = timestamp;
  stats.iter = iter++;
  stats.iter_latency_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  InflightBatchingStats& ib = stats.inflight_batching_stats;
  ib.num_scheduled_requests = num_scheduled;
  ib.num_context_requests = plan.num_context;
  ib.num_gen_requests = plan.num_generation;
  ib.num_paused_requests = static_cast<int32_t>(plan.paused.size());
  ib.num_ctx_tokens = plan.num_context_tokens;
  // TensorRT-LLM's avgNumDecodedTokensPerIter: tokens a generation request gained this iteration, on average (above
  // one with speculation).
  ib.avg_num_decoded_tokens_per_iter =
      plan.num_generation > 0 ? 1.0f + static_cast<float>(accepted_drafts) / static_cast<float>(plan.num_generation) : 0.0f;
  stats.spec_decoding_stats.num_draft_tokens = drafted_tokens;
  stats.spec_decoding_stats.num_accepted_tokens = accepted_drafts;
  stats.spec_decoding_stats.num_requests_with_draft_tokens = drafting_requests;
  stats.num_active_requests = static_cast<int32_t>(running.size() + queue.size());
  stats.num_queued_requests = static_cast<int32_t>(queue.size());
  stats.max_num_active_requests = scheduler_config.max_batch_size;
  stats.num_completed_requests = final_responses(out);
  const int64_t mem = static_cast<int64_t>(model->weight_bytes() + model->activation_bytes()) + kv_pool_bytes + draft_bytes;
  (model->on_device() ? stats.gpu_mem_usage : stats.cpu_mem_usage) = mem;
  if (forward_ran) {
    const ForwardCommStats comm = model->last_comm_stats();
    stats.comm_seconds = comm.seconds;
    stats.comm_bytes = static_cast<int64_t>(comm.bytes);
    stats.plan_bytes = static_cast<int64_t>(comm.plan_bytes);
  }
  stats.kv_cache_stats = kv.stats();
  return stats;
}

}  // namespace engine
