// The executor's loop thread: it sleeps on a condition variable whenever nothing is queued or running, takes new
// requests and cancels, runs one iteration (executor-iteration.cpp), and delivers the responses. Also the ends of
// a sequence's life (finish, fail, cancel) and the delivery of responses and stats.
#include <omp.h>

#include <cstdio>
#include <exception>
#include <string>

#include "executor/executor-impl.h"
#include "executor/response-builder.h"

namespace engine {

void Executor::Impl::run_loop() {
  // A device model's host work on this thread (guided masks, host-sampled rows) takes the threads it names.
  if (const int32_t threads = model->host_threads(); threads > 0) omp_set_num_threads(threads);
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> arrived;
    std::vector<RequestId> to_cancel;
    const LoopStep step = wait_for_work(arrived, to_cancel);
    for (auto& seq : arrived) {
      queue.push_back(seq.get());
      live.emplace(seq->id, std::move(seq));
    }
    if (step == LoopStep::stop) {
      phases.report();
      stop_loop();
      return;
    }
    std::vector<Response> out;
    for (RequestId id : to_cancel) cancel_sequence(id, out);
    if (step == LoopStep::iterate) {
      try {
        if (micro_batches > 1) run_pipeline_step(out);
        else run_iteration(out);
      } catch (const std::exception& e) {
        // A bug outside forward(): fail what was running rather than letting the thread die (which would hang
        // every waiter), and keep serving the queue.
        std::vector<Sequence*> victims = running;
        for (Sequence* s : victims) fail_sequence(*s, ErrorCode::internal, std::string("executor iteration failed: ") + e.what(), out);
      }
    }
    for (auto it = live.begin(); it != live.end();) {
      if (it->second->is_finished() && !it->second->in_flight) it = live.erase(it);  // in flight: its batch points at it
      else ++it;
    }
    if (!out.empty()) deliver(std::move(out), nullptr);
    if (phases.on() && running.empty() && queue.empty()) phases.report();  // a round of work done
  }
}

LoopStep Executor::Impl::wait_for_work(std::vector<std::unique_ptr<Sequence>>& arrived, std::vector<RequestId>& to_cancel) {
  std::unique_lock<std::mutex> lock(mu);
  LoopStep step = LoopStep::iterate;
  for (;;) {
    if (stopping) {
      step = LoopStep::stop;
      break;
    }
    // Queued guided requests waiting for their guide's masks are no work: the background thread wakes the loop when
    // they may start (executor-guide-wait.cpp).
    const bool has_work = !incoming.empty() || !cancels.empty() || queue_has_ready() || !running.empty();
    // A micro-batch in flight always ends (it was begun within the allowance, so it counts against it).
    if (!in_flight.empty() || (has_work && hold_allowance != 0)) break;
    // Held: a cancel still ends its request at once (final response, blocks freed) — what a test holding the loop
    // wants to see land — while arrivals wait in the queue for the release.
    if (!cancels.empty()) {
      step = LoopStep::cancels_only;
      break;
    }
    loop_state = hold_allowance == 0 ? LoopState::held : LoopState::idle;
    parked_cv.notify_all();
    wake.wait(lock);
  }
  loop_state = LoopState::running;
  arrived.swap(incoming);
  to_cancel.swap(cancels);
  return step;
}

void Executor::Impl::stop_loop() {
  drain_pipeline();
  // Cancel running ones first (oldest first), then the queue, so responses come out in a stable order.
  std::vector<Response> out;
  std::vector<RequestId> all;
  for (Sequence* s : running) all.push_back(s->id);
  for (Sequence* s : queue) all.push_back(s->id);
  for (RequestId id : all) cancel_sequence(id, out);
  live.clear();
  {
    std::lock_guard<std::mutex> lock(mu);
    kv_snapshot = kv.stats();
    draft_kv_snapshot = draft_kv.stats();
  }
  deliver(std::move(out), nullptr);
  std::lock_guard<std::mutex> lock(mu);
  loop_done = true;
  responses_cv.notify_all();
  parked_cv.notify_all();
}

void Executor::Impl::detach(Sequence& seq) {
  kv.release(seq.block_table);
  release_draft(seq);
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

void Executor::Impl::deliver(std::vector<Response>&& out, IterationStats* stats) {
  std::function<void(std::vector<Response>&&)> cb;
  {
    std::lock_guard<std::mutex> lock(mu);
    kv_snapshot = kv.stats();
    draft_kv_snapshot = draft_kv.stats();
    if (stats) {
      iterations_done = stats->iter + 1;
      if (hold_allowance > 0) --hold_allowance;
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
