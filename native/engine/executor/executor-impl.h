// The executor's private state, shared by executor.cpp (public API, runs on caller threads) and executor-loop.cpp
// (the loop thread). Fields are grouped by who may touch them: "guarded by mu" ones from any thread with mu held,
// "loop thread only" ones without a lock, since only the loop thread ever reads or writes them.
#pragma once
#include <atomic>
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
#include "kv-cache/kv-cache.h"
#include "sampling/beam-search.h"
#include "sampling/sampler.h"
#include "scheduling/scheduler.h"
#include "scheduling/sequence.h"
#include "scheduling/validate.h"

namespace engine {

struct Executor::Impl {
  // Immutable after construction.
  std::unique_ptr<Model> model;
  ExecutorConfig config;       // with max_seq_len resolved
  int32_t vocab_size = 0;
  ValidationLimits limits;
  SchedulerConfig scheduler_config;
  std::chrono::steady_clock::time_point epoch;
  int64_t kv_pool_bytes = 0;   // num_blocks * tokens_per_block * kv_bytes_per_token

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
  KvCacheStats kv_snapshot;
  RequestId next_id = 1;
  int32_t num_queued = 0;     // accepted and never scheduled (what max_queue_size bounds)
  std::atomic<int32_t> num_active{0};  // accepted and without a final response yet

  // Loop thread only.
  KvCacheManager kv;
  Sampler sampler;
  BeamSearch beam_search;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> live;
  std::deque<Sequence*> queue;      // waiting to (re)start; paused ones at the front
  std::vector<Sequence*> running;   // in start order (oldest first)
  uint64_t next_start_order = 0;
  int64_t iter = 0;
  std::thread thread;
  std::mutex join_mu;  // serialises shutdown() callers around the join

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
  }

  // executor-loop.cpp
  void run_loop();
  void run_iteration(std::vector<Response>& out);
  void cancel_sequence(RequestId id, std::vector<Response>& out);
  void finish_sequence(Sequence& seq, FinishReason reason, std::vector<Response>& out);
  void fail_sequence(Sequence& seq, ErrorCode code, const std::string& message, std::vector<Response>& out);
  void detach(Sequence& seq);  // frees its blocks and removes it from queue/running
  void deliver(std::vector<Response>&& out, IterationStats* stats);
  // executor-beams.cpp: a beam-search sequence in generation feeds one single-token chunk per live beam (false:
  // no block for a copy-on-write, a scheduler bug), and samples all its beams' rows in one step.
  bool add_beam_chunks(Sequence& seq, std::vector<Sequence*>& batch, std::vector<SequenceChunk>& chunks);
  void run_beam_step(Sequence& seq, const std::vector<const float*>& rows, double t_tok, std::vector<Response>& out,
                     int64_t& completed);
};

}  // namespace engine
