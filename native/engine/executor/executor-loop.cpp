// The executor's loop thread. One iteration: take new requests and cancels -> plan (scheduler.h) -> apply the
// plan to the KV cache -> one Model::forward over every scheduled chunk -> sample -> finish / stream -> stats.
// The thread sleeps on a condition variable whenever nothing is queued or running.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "executor/executor-impl.h"
#include "executor/response-builder.h"
#include "sampling/device-sampling-choice.h"
#include "sampling/stop-words.h"

namespace engine {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

template <typename Container>
void erase_ptr(Container& c, const Sequence* seq) {
  c.erase(std::remove(c.begin(), c.end(), seq), c.end());
}

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

}  // namespace

void Executor::Impl::run_loop() {
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> arrived;
    std::vector<RequestId> to_cancel;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [&] {
        return stopping || !incoming.empty() || !cancels.empty() || !queue.empty() || !running.empty();
      });
      arrived.swap(incoming);
      to_cancel.swap(cancels);
      stop = stopping;
    }
    for (auto& seq : arrived) {
      queue.push_back(seq.get());
      live.emplace(seq->id, std::move(seq));
    }

    std::vector<Response> out;
    if (stop) {
      // Cancel running ones first (oldest first), then the queue, so responses come out in a stable order.
      std::vector<RequestId> all;
      for (Sequence* s : running) all.push_back(s->id);
      for (Sequence* s : queue) all.push_back(s->id);
      for (RequestId id : all) cancel_sequence(id, out);
      live.clear();
      {
        std::lock_guard<std::mutex> lock(mu);
        kv_snapshot = kv.stats();
      }
      deliver(std::move(out), nullptr);
      std::lock_guard<std::mutex> lock(mu);
      loop_done = true;
      responses_cv.notify_all();
      return;
    }

    for (RequestId id : to_cancel) cancel_sequence(id, out);
    try {
      run_iteration(out);
    } catch (const std::exception& e) {
      // A bug outside forward(): fail what was running rather than letting the thread die (which would hang
      // every waiter), and keep serving the queue.
      std::vector<Sequence*> victims = running;
      for (Sequence* s : victims) fail_sequence(*s, ErrorCode::internal, std::string("executor iteration failed: ") + e.what(), out);
    }
    for (auto it = live.begin(); it != live.end();) {
      if (it->second->is_finished()) it = live.erase(it);
      else ++it;
    }
    if (!out.empty()) deliver(std::move(out), nullptr);
  }
}

void Executor::Impl::detach(Sequence& seq) {
  kv.release(seq.block_table);
  for (Beam& b : seq.beams) kv.release(b.block_table);  // the beams' data stays for a cancelled one's response
  seq.num_computed = 0;
  erase_ptr(running, &seq);
  if (seq.state == SequenceState::queued || seq.state == SequenceState::paused) erase_ptr(queue, &seq);
  if (!seq.ever_scheduled) {
    std::lock_guard<std::mutex> lock(mu);
    --num_queued;
  }
}

void Executor::Impl::finish_sequence(Sequence& seq, FinishReason reason, std::vector<Response>& out) {
  seq.finish_reason = reason;
  detach(seq);
  seq.state = SequenceState::finished;
  out.push_back(build_response(seq, vocab_size, /*is_final=*/true));
  --num_active;
}

void Executor::Impl::fail_sequence(Sequence& seq, ErrorCode code, const std::string& message,
                                   std::vector<Response>& out) {
  detach(seq);
  seq.state = SequenceState::finished;
  out.push_back(build_error_response(seq, code, message));
  --num_active;
}

void Executor::Impl::cancel_sequence(RequestId id, std::vector<Response>& out) {
  auto it = live.find(id);
  if (it == live.end() || it->second->is_finished()) return;  // unknown or already finished: ignored
  finish_sequence(*it->second, FinishReason::cancelled, out);
}

void Executor::Impl::run_iteration(std::vector<Response>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  IterationStats stats;
  stats.timestamp = unix_now();
  int64_t completed = static_cast<int64_t>(out.size());  // cancels processed this iteration

  // 1. Plan.
  auto entry = [&](const Sequence& s) {
    SchedulerEntry e;
    e.id = s.id;
    e.num_tokens = s.num_tokens();
    e.num_computed = s.num_computed;
    e.num_blocks_held = static_cast<int32_t>(s.block_table.size());
    e.lifetime_tokens = s.lifetime_tokens();
    e.in_generation = s.state == SequenceState::generation;
    e.is_resume = s.num_generated() > 0;
    if (s.is_beam_search()) {
      e.num_blocks_held = beam_blocks_held(s);
      e.beam_width = s.request.sampling.beam_width;
      e.num_live_beams = std::max<int32_t>(1, static_cast<int32_t>(s.beams.size()));
      e.prompt_len = s.prompt_len;
    }
    return e;
  };
  std::vector<SchedulerEntry> running_entries, queued_entries;
  for (const Sequence* s : running) running_entries.push_back(entry(*s));
  for (const Sequence* s : queue) queued_entries.push_back(entry(*s));
  if (kv.reuse_enabled()) {
    // What each queued sequence would find cached. Only the first max_batch_size can start this iteration, so
    // only those pay for the lookup.
    const size_t n = std::min(queue.size(), static_cast<size_t>(scheduler_config.max_batch_size));
    for (size_t i = 0; i < n; ++i) {
      SchedulerEntry& e = queued_entries[i];
      e.num_computed = kv.probe_prefix(queue[i]->tokens, reusable_tokens(*queue[i], vocab_size), &e.num_shared_blocks);
    }
  }
  const SchedulePlan plan = schedule_iteration(scheduler_config, running_entries, queued_entries, kv.num_free_blocks());

  // 2. Apply pauses: free their blocks; back to the front of the queue in their original start order, so the
  // oldest paused one resumes first.
  std::vector<Sequence*> paused;
  for (RequestId id : plan.paused) paused.push_back(live.at(id).get());
  std::sort(paused.begin(), paused.end(), [](const Sequence* a, const Sequence* b) { return a->start_order < b->start_order; });
  for (auto it = paused.rbegin(); it != paused.rend(); ++it) {
    Sequence* s = *it;
    kv.release(s->block_table);
    s->num_computed = 0;
    s->state = SequenceState::paused;
    erase_ptr(running, s);
    queue.push_front(s);
  }

  // 3. Start the admitted ones (they are the first entries of the queue, FIFO) and build the chunks.
  std::vector<Sequence*> batch;
  std::vector<SequenceChunk> chunks;
  std::vector<int32_t> ctx_rows_from, ctx_rows_to;  // prompt positions whose logits rows to keep
  const double t_sched = now();
  // Attach the cached prefixes of starting sequences before any block is allocated: allocation may evict cached
  // blocks, and the plan counted on these. Same state as the probe above, so the same chains are found.
  for (const ScheduledWork& w : plan.work) {
    if (!w.is_new) continue;
    Sequence* s = live.at(w.id).get();
    s->num_computed = kv.attach_prefix(s->block_table, s->tokens, reusable_tokens(*s, vocab_size));
  }
  for (const ScheduledWork& w : plan.work) {
    Sequence* s = live.at(w.id).get();
    if (w.is_new) {
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
    const int32_t end = std::min(s->num_tokens(), s->num_computed + w.num_new_tokens);
    if (!s->beams.empty()) {  // beam search in generation: one chunk per live beam, no context rows
      const size_t before = chunks.size();
      if (!add_beam_chunks(*s, batch, chunks)) {
        batch.resize(before);
        chunks.resize(before);
        fail_sequence(*s, ErrorCode::internal, "KV cache: no free block for a beam of a scheduled sequence (scheduler bug)", out);
        ++completed;
        continue;
      }
      ctx_rows_from.resize(chunks.size(), 0);
      ctx_rows_to.resize(chunks.size(), 0);
      continue;
    }
    if (!kv.ensure_capacity(s->block_table, end)) {
      fail_sequence(*s, ErrorCode::internal, "KV cache: no free block for a scheduled sequence (scheduler bug)", out);
      ++completed;
      continue;
    }
    SequenceChunk c;
    c.tokens.assign(s->tokens.begin() + s->num_computed, s->tokens.begin() + end);
    c.past_len = s->num_computed;
    c.block_ids = s->block_table;
    int32_t from = std::max(s->num_computed, s->context_logits_rows(vocab_size));
    int32_t to = std::min(end, s->prompt_len);
    c.all_logits = s->request.output.return_context_logits && from < to;
    if (!c.all_logits) from = to = 0;
    choose_device_sampling(*s, model->samples_on_device(), c);
    batch.push_back(s);
    chunks.push_back(std::move(c));
    ctx_rows_from.push_back(from);
    ctx_rows_to.push_back(to);
  }

  stats.inflight_batching_stats.num_scheduled_requests = static_cast<int32_t>(batch.size());
  stats.inflight_batching_stats.num_context_requests = plan.num_context;
  stats.inflight_batching_stats.num_gen_requests = plan.num_generation;
  stats.inflight_batching_stats.num_paused_requests = static_cast<int32_t>(plan.paused.size());
  stats.inflight_batching_stats.num_ctx_tokens = plan.num_context_tokens;
  stats.inflight_batching_stats.avg_num_decoded_tokens_per_iter = plan.num_generation > 0 ? 1.0f : 0.0f;

  // 4. One forward pass for the whole batch.
  if (!batch.empty()) {
    ForwardOutput fo;
    std::string error;
    ErrorCode error_code = ErrorCode::internal;
    try {
      model->forward(chunks, fo);
      // Check the shape before trusting any row index.
      size_t rows = 0;
      bool sampled_ok = true;
      for (size_t i = 0; i < chunks.size() && i < fo.first_row.size(); ++i) {
        const SequenceChunk& c = chunks[i];
        if (fo.first_row[i] < 0) {  // sampled on the device: only where asked, with the token present
          sampled_ok = sampled_ok && c.sample_on != SampleOn::host && fo.sampled.size() == chunks.size();
          continue;
        }
        rows += c.all_logits ? c.tokens.size() : 1;
      }
      if (fo.vocab_size != vocab_size || fo.first_row.size() != chunks.size() || !sampled_ok ||
          fo.logits.size() < rows * static_cast<size_t>(vocab_size)) {
        throw EngineError(ErrorCode::internal, "model returned logits of an unexpected shape (vocab " +
                                                   std::to_string(fo.vocab_size) + ", " +
                                                   std::to_string(fo.logits.size()) + " values for " +
                                                   std::to_string(rows) + " rows)");
      }
    } catch (const EngineError& e) {
      error = e.what();
      error_code = e.code();
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) {
      // Only this batch is affected: its requests get error responses and their blocks back; the queue keeps going.
      for (Sequence* s : batch)
        if (!s->is_finished()) fail_sequence(*s, error_code, "forward pass failed: " + error, out);
      completed += static_cast<int64_t>(batch.size());
      batch.clear();
    }

    // 5. Sample and update.
    const double t_tok = now();
    const size_t V = static_cast<size_t>(vocab_size);
    for (size_t i = 0; i < batch.size(); ++i) {
      Sequence& s = *batch[i];
      if (s.is_finished()) continue;
      if (!s.beams.empty()) {  // its live beams' chunks are consecutive: one beam step over all their rows
        std::vector<const float*> rows;
        for (size_t k = 0; k < s.beams.size(); ++k) rows.push_back(fo.logits.data() + static_cast<size_t>(fo.first_row[i + k]) * V);
        i += s.beams.size() - 1;
        s.num_computed += 1;
        run_beam_step(s, rows, t_tok, out, completed);
        continue;
      }
      const SequenceChunk& c = chunks[i];
      const bool on_device = fo.first_row[i] < 0;
      const size_t first = on_device ? 0 : static_cast<size_t>(fo.first_row[i]);
      if (ctx_rows_from[i] < ctx_rows_to[i]) {
        const size_t a = first + static_cast<size_t>(ctx_rows_from[i] - c.past_len);
        const size_t b = first + static_cast<size_t>(ctx_rows_to[i] - c.past_len);
        s.context_logits.insert(s.context_logits.end(), fo.logits.begin() + a * V, fo.logits.begin() + b * V);
      }
      s.num_computed += static_cast<int32_t>(c.tokens.size());
      kv.commit_full_blocks(s.block_table, s.tokens, s.num_computed);  // prefix reuse: newly full blocks
      if (s.num_computed < s.num_tokens()) continue;  // a partial context chunk: nothing to sample yet

      s.state = SequenceState::generation;
      const size_t row = first + (c.all_logits ? c.tokens.size() - 1 : 0);
      const float* logits = on_device ? nullptr : fo.logits.data() + row * V;
      if (s.is_beam_search()) {  // the context's row: the fork into beams
        run_beam_step(s, {logits}, t_tok, out, completed);
        continue;
      }
      SamplingContext sc;
      sc.config = &s.request.sampling;
      sc.step = static_cast<uint64_t>(s.num_generated());
      sc.tokens = &s.tokens;
      sc.prompt_len = s.prompt_len;
      sc.end_id = s.request.end_id;
      sc.bad_words = &s.request.bad_words;
      sc.embedding_bias = &s.request.embedding_bias;
      const SampledToken tok = on_device ? SampledToken{fo.sampled[i].token, fo.sampled[i].log_prob}
                                         : sampler.sample(logits, vocab_size, sc);
      if (s.first_token_time == 0) s.first_token_time = t_tok;
      s.last_token_time = t_tok;

      // TensorRT-LLM semantics: generation stops at end_id, which is not part of the output.
      if (s.request.end_id >= 0 && tok.token == s.request.end_id) {
        finish_sequence(s, FinishReason::end_id, out);
        ++completed;
        continue;
      }
      s.tokens.push_back(tok.token);
      if (s.request.output.return_log_probs) {
        s.log_probs.push_back(tok.log_prob);
        s.cum_log_prob += tok.log_prob;
      }
      if (s.request.output.return_generation_logits) s.generation_logits.insert(s.generation_logits.end(), logits, logits + V);
      if (!s.request.stop_words.empty() && ends_with_stop_word(s.tokens, s.prompt_len, s.request.stop_words)) {
        finish_sequence(s, FinishReason::stop_words, out);  // a stop word completed at max_tokens still counts
        ++completed;
      } else if (s.num_generated() >= s.request.max_tokens) {
        finish_sequence(s, FinishReason::length, out);
        ++completed;
      } else if (s.request.streaming) {
        out.push_back(build_response(s, vocab_size, /*is_final=*/false));
      }
    }
  }

  if (plan.work.empty() && completed == 0 && plan.paused.empty()) {
    // Nothing could run (should not happen: the oldest running sequence always fits). Avoid a hot spin.
    std::unique_lock<std::mutex> lock(mu);
    wake.wait_for(lock, std::chrono::milliseconds(1));
    return;
  }

  stats.iter = iter++;
  stats.iter_latency_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats.num_active_requests = static_cast<int32_t>(running.size() + queue.size());
  stats.num_queued_requests = static_cast<int32_t>(queue.size());
  stats.max_num_active_requests = scheduler_config.max_batch_size;
  stats.num_completed_requests = completed;
  const int64_t mem = static_cast<int64_t>(model->weight_bytes() + model->activation_bytes()) + kv_pool_bytes;
  (model->on_device() ? stats.gpu_mem_usage : stats.cpu_mem_usage) = mem;
  if (!batch.empty()) {
    const ForwardCommStats comm = model->last_comm_stats();
    stats.comm_seconds = comm.seconds;
    stats.comm_bytes = static_cast<int64_t>(comm.bytes);
    stats.plan_bytes = static_cast<int64_t>(comm.plan_bytes);
  }
  stats.kv_cache_stats = kv.stats();
  deliver(std::move(out), &stats);
  out.clear();
}

void Executor::Impl::deliver(std::vector<Response>&& out, IterationStats* stats) {
  std::function<void(std::vector<Response>&&)> cb;
  {
    std::lock_guard<std::mutex> lock(mu);
    kv_snapshot = kv.stats();
    if (stats) {
      iteration_stats.push_back(*stats);
      const size_t cap = static_cast<size_t>(std::max(1, config.iter_stats_max_iterations));
      while (iteration_stats.size() > cap) iteration_stats.pop_front();
    }
    if (out.empty()) return;
    if (callback) {
      cb = callback;
    } else {
      for (Response& r : out) responses.push_back(std::move(r));
      responses_cv.notify_all();
      return;
    }
  }
  // Outside the lock: the callback may enqueue or cancel.
  try {
    cb(std::move(out));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: response callback threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "engine: response callback threw\n");
  }
}

}  // namespace engine
