// The executor's private state, shared by executor.cpp (public API, runs on caller threads) and the loop thread's
// files: executor-loop.cpp (waiting, cancels, delivery), executor-iteration.cpp (one iteration's steps),
// executor-sample.cpp (tokens into sequences), executor-beams.cpp. Fields are grouped by who may touch them:
// "guarded by mu" ones from any thread with mu held, "loop thread only" ones without a lock, since only the loop
// thread ever reads or writes them.
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "executor/executor.h"
#include "executor/iteration-phases.h"
#include "grammar/grammar-cache.h"
#include "kv-cache/kv-cache.h"
#include "lora/lora-cache.h"
#include "medusa/medusa-tree.h"
#include "sampling/beam-search.h"
#include "sampling/sampler.h"
#include "scheduling/scheduler.h"
#include "scheduling/sequence.h"
#include "scheduling/validate.h"

namespace engine {

// What the loop does after waiting: an iteration, only the cancels (held: no iteration may start, but a cancel
// still ends its request at once), or the shutdown.
enum class LoopStep { iterate, cancels_only, stop };

// What the loop thread is doing, for the test hook's waits.
enum class LoopState {
  running,  // draining, iterating or delivering
  idle,     // asleep with nothing it can run (queued guided requests may be waiting for their guide's masks)
  held,     // asleep because its iteration allowance is spent (work may be waiting)
};

// Removes `seq` from the queue or the running set.
template <typename Container>
void erase_ptr(Container& c, const Sequence* seq) {
  c.erase(std::remove(c.begin(), c.end(), seq), c.end());
}

// One iteration's batch, built by build_chunks and read by the forward and sampling steps. Index i is chunk i.
struct IterationBatch {
  std::vector<Sequence*> seqs;        // the chunk's sequence (a beam-search one once per live beam, consecutively)
  std::vector<SequenceChunk> chunks;
  // Prompt positions [from, to) whose logits rows the chunk's sequence keeps (return_context_logits); else 0, 0.
  std::vector<int32_t> ctx_rows_from, ctx_rows_to;
  // Speculation: guessed tokens the chunk carries after its sequence's next input token (0: none).
  std::vector<int32_t> drafts;
  bool empty() const { return seqs.empty(); }
};

double unix_now();                                      // seconds since the Unix epoch
// A draft's kMedusaTopK best ids of a logits row over `vocab` ids, likeliest first (the lower id on ties).
std::vector<int32_t> top_choices(const float* row, int32_t vocab);
int64_t final_responses(const std::vector<Response>& out);  // how many of `out` are final

// Which Model call run_forward makes: forward() whole, or a pipelined micro-batch's begin or end (model.h).
enum class ForwardCall { whole, begin, end };

// Pipelined pp: a micro-batch begun on the model and not yet ended (executor-pipeline.cpp).
struct MicroBatch {
  SchedulePlan plan;
  IterationBatch batch;
  int32_t id = 0;  // TensorRT-LLM's microBatchId: launches modulo the micro-batches in flight
  std::chrono::steady_clock::time_point t0;
  double timestamp = 0;
};

struct Executor::Impl {
  // Immutable after construction.
  std::unique_ptr<Model> model;  // (freed by free_models once the loop is joined)
  ModelConfig model_config;      // the model's, kept past free_models
  std::string kv_dtype;          // Model::kv_cache_dtype(), likewise
  std::string tp_all_reduce;     // Model::tp_all_reduce(), likewise
  ExecutorConfig config;       // with max_seq_len resolved
  int32_t vocab_size = 0;
  ValidationLimits limits;
  SchedulerConfig scheduler_config;
  std::chrono::steady_clock::time_point epoch;
  int64_t kv_pool_bytes = 0;   // num_blocks * tokens_per_block * kv_bytes_per_token
  // Speculation by draft model (null: none): the model that guesses, on this rank alone, and what it holds (weights,
  // activations and its KV pool).
  std::unique_ptr<Model> draft_model;
  bool eagle = false;  // the draft is EAGLE heads (Model::takes_features): it reads the model's final hidden states
  // Floats of the model's a position the EAGLE draft reads (Sequence::eagle_features): hidden, or EAGLE-3's
  // feature_layers() * hidden.
  int64_t eagle_feature_width = 0;
  int32_t medusa_heads = 0;  // the model's Medusa heads (Model::medusa_heads): they guess when > 0
  // The candidates a step checks (ExecutorConfig::medusa_choices or default_medusa_choices), as a tree where the
  // model takes token trees; else the chain of each head's first choice.
  MedusaChoices medusa_choices, chain_choices;
  bool medusa_trees = false;
  // EAGLE's tree of guesses (ExecutorConfig::eagle_choices; executor-eagle-tree.cpp), where the model takes token
  // trees; else the draft guesses a chain.
  MedusaChoices eagle_choices;
  bool eagle_trees = false;
  int64_t draft_bytes = 0;
  int32_t micro_batches = 1;   // pipelined pp: micro-batches kept in flight (config.pp_micro_batches resolved)
  // LoRA (executor-lora.cpp; null unless config.lora.enabled): the host cache of adapters by task id (any thread:
  // it has its own lock) and the model's slots (loop thread only).
  std::unique_ptr<LoraCache> lora_cache;
  std::unique_ptr<LoraSlots> lora_slots;
  // KV cache events: recorded by kv on the loop thread, drained by any thread (the buffer has its own lock); null
  // unless kv_cache_event_buffer_max_size > 0 and reuse is on.
  std::unique_ptr<KvCacheEventBuffer> kv_events;

  // Guarded by mu.
  mutable std::mutex mu;
  std::condition_variable wake;          // the loop sleeps on it while it has nothing to do
  std::condition_variable responses_cv;  // await_responses sleeps on it
  std::vector<std::unique_ptr<Sequence>> incoming;  // enqueued, not yet seen by the loop
  std::vector<RequestId> cancels;
  bool stopping = false;      // shutdown requested: no more enqueues
  bool loop_done = false;     // the loop thread has emitted its last responses
  std::deque<Response> responses;
  std::function<void(std::vector<Response>&&)> callback;
  std::deque<IterationStats> iteration_stats;
  KvCacheStats kv_snapshot, draft_kv_snapshot;
  RequestId next_id = 1;
  int32_t num_queued = 0;     // accepted and never scheduled (what max_queue_size bounds)
  std::atomic<int32_t> num_active{0};  // accepted and without a final response yet
  // The test hook (Executor::hold_iterations): iterations the loop may still start; -1: no limit.
  int64_t hold_allowance = -1;
  LoopState loop_state = LoopState::running;
  std::condition_variable parked_cv;  // wait_until_held / wait_until_idle sleep on it
  int64_t iterations_done = 0;        // iterations recorded in the stats (the loop's `iter`, readable by others)

  // Loop thread only.
  KvCacheManager kv;
  KvCacheManager draft_kv;  // the draft model's pool (Sequence::draft_blocks); empty without one
  Sampler sampler;
  // Guided decoding: compiled guides by content (null: no vocabulary configured, guided requests refused), and the
  // loop thread's mask of the sequence being sampled.
  std::unique_ptr<grammar::GrammarCache> grammars;
  // Guided requests wait queued for their guide's masks (executor-guide-wait.cpp); TRTLLM_GRAMMAR_WAIT_FOR_MASKS=0:
  // they start at once. Set at construction.
  bool wait_for_masks = false;
  std::vector<uint64_t> allowed_scratch;
  IterationPhases phases;  // TRTLLM_ITER_PHASES=1
  std::vector<float> row_scratch;  // a device-sampled row fetched back for a guided redraw
  std::vector<int8_t> guided_fits, guided_accepted;  // check_device_guided's answers for this iteration's chunks
  std::vector<uint8_t> guided_no_token;  // per chunk of the last pass: its guide allowed no token (device rows)
  BeamSearch beam_search;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> live;
  std::deque<Sequence*> queue;      // waiting to (re)start; paused ones at the front
  std::vector<Sequence*> running;   // in start order (oldest first)
  uint64_t next_start_order = 0;
  int64_t iter = 0;  // iterations recorded in the stats so far
  std::deque<MicroBatch> in_flight;  // pipelined pp: begun, not yet ended, oldest first
  int64_t micro_batches_begun = 0;
  std::thread thread;
  std::mutex join_mu;  // serialises shutdown() callers around the join

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
  }

  // executor-loop.cpp
  void run_loop();
  // Sleeps until there is work the loop may do (or shutdown), taking what enqueue and cancel queued. Sets
  // loop_state while asleep. Returns whether shutdown was requested.
  LoopStep wait_for_work(std::vector<std::unique_ptr<Sequence>>& arrived, std::vector<RequestId>& to_cancel);
  void stop_loop();  // shutdown: every sequence cancelled, the last responses delivered
  void cancel_sequence(RequestId id, std::vector<Response>& out);
  // The final response of `seq` with `reason`, its blocks freed. Every final response (finish, fail, cancel) is
  // one completed request in the iteration's stats.
  void finish_sequence(Sequence& seq, FinishReason reason, std::vector<Response>& out);
  void fail_sequence(Sequence& seq, ErrorCode code, const std::string& message, std::vector<Response>& out);
  void detach(Sequence& seq);  // frees its blocks and removes it from queue/running
  void deliver(std::vector<Response>&& out, IterationStats* stats);

  // executor-guide-wait.cpp: the grammar cache (its background thread wakes the loop when a guide's masks are
  // done), whether a queued sequence still waits for its guide's masks, and whether any queued one may start.
  void setup_guided_decoding();
  bool awaits_masks(const Sequence& s) const;
  bool queue_has_ready() const;

  // executor-iteration.cpp: one iteration, appending its responses to `out` (which may already hold the final
  // responses of this pass's cancels), in these steps:
  void run_iteration(std::vector<Response>& out);
  // The scheduler's plan, from a snapshot of every sequence; a limit < 0: the configured one.
  SchedulePlan plan_iteration(int32_t max_batch_size = -1, int32_t max_num_tokens = -1);
  void apply_pauses(const SchedulePlan& plan);           // paused ones freed, back to the front of the queue
  void start_admitted(const SchedulePlan& plan);         // admitted ones leave the queue, with their cached prefix
  IterationBatch build_chunks(const SchedulePlan& plan, std::vector<Response>& out);  // blocks + one chunk each
  // The forward pass over the batch and the check of its output's shape (at the end of a pipelined one). False:
  // the batch failed (each of its sequences got an error response), nothing to sample.
  bool run_forward(IterationBatch& batch, ForwardOutput& fo, std::vector<Response>& out,
                   ForwardCall call = ForwardCall::whole);
  IterationStats collect_stats(const SchedulePlan& plan, int32_t num_scheduled, bool forward_ran,
                               std::chrono::steady_clock::time_point t0, double timestamp,
                               const std::vector<Response>& out);

  // executor-lora.cpp. setup_lora: the cache (the preloaded adapters read and checked) and the slots, at
  // construction; returns the device bytes it keeps for adapters, which the KV pool does not get.
  size_t setup_lora();
  // The request's adapter, on the caller's thread at enqueue: cached from its weights, or found by its task id
  // (key 0: none). Throws EngineError(invalid_argument) naming lora_task_id when it is neither.
  CachedLora resolve_lora(const Request& r);
  // Each chunk of the batch gets its sequence's adapter's slot, loading the adapter where the slot held another.
  void assign_lora_slots(IterationBatch& b, std::vector<Response>& out);
  // executor-pipeline.cpp: with micro_batches > 1 the loop calls run_pipeline_step instead of run_iteration. It
  // begins a micro-batch while one is free (the same plan -> chunks steps, over the sequences not in flight) and
  // ends the oldest once all are in flight or nothing more can begin; the end samples and records the iteration.
  void run_pipeline_step(std::vector<Response>& out);
  bool may_begin_micro_batch();
  bool begin_micro_batch(std::vector<Response>& out);  // false: nothing began
  void end_micro_batch(std::vector<Response>& out);
  void drain_pipeline();  // shutdown: every micro-batch in flight ended (its tokens delivered)

  // executor-sample.cpp: each sequence of the batch takes its forward output's rows (context logits, the token
  // after a finished chunk, a beam step), and finishes or streams.
  void sample_and_update(const IterationBatch& batch, const ForwardOutput& fo, std::vector<Response>& out);
  void advance_sequence(Sequence& s, const IterationBatch& batch, size_t i, const ForwardOutput& fo, double t_tok,
                        std::vector<Response>& out);
  // The host sampler's view of a sequence's next draw (its config, step, tokens and processors; no guide).
  SamplingContext sampling_context(const Sequence& s) const;
  // executor-speculation.cpp: guessed tokens added to greedy decode chunks once the batch's blocks are taken, and
  // the check of a chunk's rows against its guesses, emitting every token the model agrees with and its own next.
  void add_drafts(IterationBatch& b);
  // executor-draft-model.cpp: the draft model's guesses for the chunks in `asks` (room: the most each may take;
  // depth: how deep a tree of them may go), after it caught up on the tokens it has not seen: a chain (each parent
  // the guess before), or EAGLE's tree with eagle_trees; empty for a chunk it could not draft for (no draft blocks).
  struct DraftAsk {
    size_t chunk;
    int32_t room;
    int32_t depth = INT32_MAX;
  };
  std::vector<TokenTree> draft_model_guesses(const IterationBatch& b, const std::vector<DraftAsk>& asks);
  // executor-eagle-tree.cpp: EAGLE's trees, grown depth by depth from each ask's root — its last slot caught up, at
  // draft position known[k] - 1, whose best guesses are root_top[k] (kMedusaTopK ids; empty: no tree) and whose
  // output is root_out[k] (hidden floats) — within room[k] nodes.
  std::vector<TokenTree> grow_eagle_trees(const IterationBatch& b, const std::vector<DraftAsk>& asks,
                                          const std::vector<int32_t>& room, const std::vector<int32_t>& known,
                                          const std::vector<std::vector<int32_t>>& root_top,
                                          const std::vector<float>& root_out);
  // EAGLE: the chunk rows whose model features a check kept, in position order (verify_drafts: the rows before the
  // guesses and the kept path's; empty: every row the pass computed for good), for keep_eagle_features.
  std::vector<int32_t> eagle_rows;
  void release_draft(Sequence& s);  // its draft blocks back to the pool; the draft starts over
  // EAGLE: whether the sequence's passes keep the model's hidden states for the draft (a request that may
  // speculate), and the keeping of those a pass computed for good, its rows from logits row `first_row` on.
  bool eagle_may_draft(const Sequence& s) const;
  // Whether the draft can read the features of chunk `c` of `s` (they follow those it has): where it has nothing yet,
  // it starts at the chunk (Sequence::draft_base).
  bool eagle_takes_chunk(Sequence& s, const SequenceChunk& c);
  void keep_eagle_features(Sequence& s, const SequenceChunk& c, size_t first_row);
  // The Medusa heads' guesses for the token logits row `row` drew (just emitted): asked for by run_heads, once the
  // iteration's draws are done, for every such row at once (Model::head_guesses).
  void keep_head_guesses(Sequence& s, size_t row);
  void run_heads();
  std::vector<int32_t> head_rows, head_scratch;
  // Per chunk of the iteration being sampled: its first logit row (Model::head_guesses' numbering), set by
  // sample_and_update.
  std::vector<size_t> logit_first;
  std::vector<Sequence*> head_seqs;
  void verify_drafts(Sequence& s, const IterationBatch& batch, size_t i, const ForwardOutput& fo, double t_tok,
                     std::vector<Response>& out);
  int64_t accepted_drafts = 0;  // this iteration's guesses the model agreed with (iteration stats)
  int64_t drafted_tokens = 0;   // and the guesses made, over drafting_requests requests
  int32_t drafting_requests = 0;
  // A guided token drawn again from the row the device drew it from (Model::sampled_row), within the budget.
  SampledToken redraw_in_budget(Sequence& s, const float* row);
  // The guide's host work on the tokens the device drew (the budget check, and the advance past a token that fits),
  // for the batch's guided rows on several threads: a few microseconds a row, 64 rows a step. Per chunk into
  // guided_fits / guided_accepted (-1: not done here, 0: no, 1: yes), which advance_sequence and emit_token read.
  void check_device_guided(const IterationBatch& batch, const ForwardOutput& fo);
  // Appends a drawn token (TensorRT-LLM semantics: end_id stops and is not output), then finishes or streams.
  // accepted: the guide already advanced past it (1), refused it (0), or not asked yet (-1).
  void emit_token(Sequence& s, const SampledToken& tok, const float* logits, double t_tok, std::vector<Response>& out,
                  int8_t accepted = -1);

  // executor-beams.cpp: a beam-search sequence in generation feeds one single-token chunk per live beam (false:
  // no block for a copy-on-write, a scheduler bug), and samples all its beams' rows in one step.
  bool add_beam_chunks(Sequence& seq, IterationBatch& batch);
  void run_beam_step(Sequence& seq, const std::vector<const float*>& rows, double t_tok, std::vector<Response>& out);
};

}  // namespace engine
