// Pipelined pipeline parallelism: the loop keeps up to micro_batches forward passes in flight, each over its own
// sequences, so while the last stage computes micro-batch i the first computes i + 1 (and the leader samples i - 1).
// A micro-batch is an iteration of executor-iteration.cpp cut in two: its begin plans over the sequences not in
// flight, starts the admitted ones, builds the chunks and begins the pass; its end waits for the logits, samples
// and records the iteration's stats (with TensorRT-LLM's microBatchId). Requests keep every semantic of the
// unpipelined loop — streaming, stop words, cancel, chunked context, pauses under KV pressure — because each
// sequence still sees one forward pass at a time, in order.
#include <algorithm>

#include "executor/executor-impl.h"

namespace engine {

void Executor::Impl::run_pipeline_step(std::vector<Response>& out) {
  bool begun = false;
  if (static_cast<int32_t>(in_flight.size()) < micro_batches && may_begin_micro_batch()) begun = begin_micro_batch(out);
  // End the oldest when the pipeline is full, or when nothing more could begin (everything left is in flight).
  if (!in_flight.empty() && (!begun || static_cast<int32_t>(in_flight.size()) >= micro_batches)) {
    end_micro_batch(out);
    return;
  }
  if (!begun && in_flight.empty() && final_responses(out) == 0) {
    // Nothing could run (should not happen: the oldest running sequence always fits). Avoid a hot spin.
    std::unique_lock<std::mutex> lock(mu);
    wake.wait_for(lock, std::chrono::milliseconds(1));
  }
}

bool Executor::Impl::may_begin_micro_batch() {
  // The test hook counts iterations as they are recorded, at a micro-batch's end: those in flight are spoken for.
  std::lock_guard<std::mutex> lock(mu);
  return hold_allowance < 0 || hold_allowance > static_cast<int64_t>(in_flight.size());
}

bool Executor::Impl::begin_micro_batch(std::vector<Response>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const double timestamp = unix_now();
  // The slowest micro-batch sets the pace of every stage, so each is given about an equal part of the work: of the
  // sequences not in flight, a share of the micro-batches still free (a steady decode of n sequences settles into
  // groups of n / micro_batches), and of the tokens, an equal part of what is in flight and waiting (so a wave of
  // new prompts is spread over the micro-batches instead of stalling the decodes behind one big one).
  // Each sequence's smallest step (a decode: one token per live beam; a context: what is left of it) counts in the
  // tokens, and the budget is never below the largest one, so every sequence can still run.
  int64_t ready = 0, tokens = 0, largest_step = 1;
  for (const MicroBatch& mb : in_flight)
    for (const SequenceChunk& c : mb.batch.chunks) tokens += static_cast<int64_t>(c.tokens.size());
  auto count = [&](const Sequence& s) {
    ++ready;
    const int64_t step = s.state == SequenceState::generation
                             ? std::max<int64_t>(1, static_cast<int64_t>(s.beams.size()))
                             : std::max<int64_t>(1, s.num_tokens() - s.num_computed);
    tokens += step;
    largest_step = std::max(largest_step, step);
  };
  for (const Sequence* s : running)
    if (!s->in_flight) count(*s);
  for (const Sequence* s : queue)
    if (!awaits_masks(*s)) count(*s);
  const int64_t free_slots = micro_batches - static_cast<int64_t>(in_flight.size());
  const int64_t share = std::max<int64_t>(1, (ready + free_slots - 1) / free_slots);
  const int64_t budget = std::max({(tokens + micro_batches - 1) / micro_batches, share, largest_step});
  const SchedulePlan plan = plan_iteration(static_cast<int32_t>(std::min<int64_t>(share, scheduler_config.max_batch_size)),
                                           static_cast<int32_t>(std::min<int64_t>(budget, scheduler_config.max_num_tokens)));
  apply_pauses(plan);
  start_admitted(plan);
  IterationBatch batch = build_chunks(plan, out);
  if (batch.empty()) {
    // Pauses or failures without a pass are still an iteration, as in run_iteration.
    if (!plan.work.empty() || !plan.paused.empty() || final_responses(out) > 0) {
      IterationStats stats = collect_stats(plan, 0, false, t0, timestamp, out);
      deliver(std::move(out), &stats);
      out.clear();
    }
    return false;
  }
  ForwardOutput unused;
  if (!run_forward(batch, unused, out, ForwardCall::begin)) return false;
  for (Sequence* s : batch.seqs) s->in_flight = true;
  MicroBatch& mb = in_flight.emplace_back();
  mb.plan = plan;
  mb.batch = std::move(batch);
  mb.id = static_cast<int32_t>(micro_batches_begun++ % micro_batches);
  mb.t0 = t0;
  mb.timestamp = timestamp;
  return true;
}

void Executor::Impl::end_micro_batch(std::vector<Response>& out) {
  MicroBatch mb = std::move(in_flight.front());
  in_flight.pop_front();
  for (Sequence* s : mb.batch.seqs) s->in_flight = false;
  ForwardOutput fo;
  const bool forward_ran = run_forward(mb.batch, fo, out, ForwardCall::end);
  // A sequence cancelled while in flight already has its final response; sampling skips it.
  if (forward_ran) sample_and_update(mb.batch, fo, out);
  IterationStats stats = collect_stats(mb.plan, static_cast<int32_t>(mb.batch.seqs.size()), forward_ran, mb.t0,
                                       mb.timestamp, out);
  stats.inflight_batching_stats.micro_batch_id = mb.id;
  deliver(std::move(out), &stats);
  out.clear();
}

void Executor::Impl::drain_pipeline() {
  // The followers run every pass that was begun; the leader ends each, so its posted receives complete before the
  // buffers go away. Their tokens are delivered; stop_loop then cancels what is left.
  while (!in_flight.empty()) {
    std::vector<Response> out;
    end_micro_batch(out);
  }
}

}  // namespace engine
