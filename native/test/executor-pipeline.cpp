// Pipelined pipeline parallelism in the executor (executor-pipeline.cpp) over a fake model whose micro-batches
// compute only when they end — as if every layer sat on a later stage — so a sequence scheduled again while its
// micro-batch is in flight would read K/V not yet written and fail. The tests check that outputs equal the
// unpipelined reference, that the pipeline fills to its depth, and that cancel, KV pressure and shutdown keep their
// semantics while micro-batches are in flight.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

namespace {

class PipelinedFake : public FakeModel {
 public:
  explicit PipelinedFake(int32_t depth) : depth_(depth) {}

  int32_t pipeline_depth() const override { return depth_; }

  void forward_begin(const std::vector<SequenceChunk>& chunks) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int32_t>(pending_.size()) >= depth_) throw std::runtime_error("more micro-batches begun than the depth");
    pending_.push_back(chunks);
    max_in_flight = std::max<int>(max_in_flight, static_cast<int>(pending_.size()));
    ++begins;
  }

  void forward_end(ForwardOutput& out) override {
    std::vector<SequenceChunk> chunks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (pending_.empty()) throw std::runtime_error("forward_end with nothing in flight");
      ++ends_waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return gate_open_; });
      --ends_waiting_;
      chunks = std::move(pending_.front());
      pending_.pop_front();
    }
    FakeModel::forward(chunks, out);  // the later stages compute now
  }

  // The test holds the loop inside forward_end: close, wait until it blocks with `in_flight` begun, open.
  void close_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    gate_open_ = false;
  }
  void open_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    gate_open_ = true;
    cv_.notify_all();
  }
  bool wait_blocked_with(size_t in_flight) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return ends_waiting_ > 0 && pending_.size() == in_flight; });
  }

  std::atomic<int> begins{0};
  std::atomic<int> max_in_flight{0};

 private:
  const int32_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<SequenceChunk>> pending_;
  bool gate_open_ = true;
  int ends_waiting_ = 0;
};

struct Pipelined {
  PipelinedFake* model;
  Harness h;
  Pipelined(int32_t depth, ExecutorConfig config) : Pipelined(std::make_unique<PipelinedFake>(depth), config) {}
  Pipelined(std::unique_ptr<PipelinedFake> m, ExecutorConfig config) : model(m.get()), h(std::move(m), config) {}
};

// A request whose output is its generated tokens alone, streamed or not.
Request request_of(std::vector<int32_t> prompt, int32_t max_tokens, bool streaming) {
  Request r = make_request(std::move(prompt), max_tokens, streaming);
  r.output.exclude_input_from_output = true;
  return r;
}

// Requests of different lengths, enqueued while the loop holds so the first plan sees all of them.
std::map<RequestId, std::vector<int32_t>> enqueue_mixed(Harness& h, int n, int32_t max_tokens_base) {
  std::map<RequestId, std::vector<int32_t>> refs;
  h.executor->hold_iterations(0);
  for (int i = 0; i < n; ++i) {
    const auto prompt = prompt_of(5 + i, 20 + i);
    const int32_t max_tokens = max_tokens_base + i % 3;
    refs[h.executor->enqueue(request_of(prompt, max_tokens, /*streaming=*/i % 2 == 0))] =
        reference_greedy(*h.model, prompt, max_tokens);
  }
  h.executor->hold_iterations(-1);
  return refs;
}

std::set<RequestId> ids_of(const std::map<RequestId, std::vector<int32_t>>& refs) {
  std::set<RequestId> ids;
  for (const auto& [id, _] : refs) ids.insert(id);
  return ids;
}

std::set<int32_t> micro_batch_ids(Executor& e, int32_t* paused = nullptr) {
  std::set<int32_t> ids;
  for (const IterationStats& s : e.get_latest_iteration_stats()) {
    ids.insert(s.inflight_batching_stats.micro_batch_id);
    if (paused) *paused += s.inflight_batching_stats.num_paused_requests;
  }
  return ids;
}

ExecutorConfig pipeline_config() {
  ExecutorConfig c = small_config();
  c.max_batch_size = 8;
  return c;
}

void test_outputs_equal_reference_and_the_pipeline_fills(int32_t depth) {
  Pipelined p(depth, pipeline_config());
  const auto refs = enqueue_mixed(p.h, 7, 9);
  auto out = p.h.collect(ids_of(refs));
  for (const auto& [id, ref] : refs) {
    CHECK_MSG(out[id].is_final && !out[id].has_error, "request %lld: %s", static_cast<long long>(id), out[id].error_message.c_str());
    CHECK(out[id].tokens == ref);
    CHECK(out[id].reason == FinishReason::length);
  }
  CHECK_MSG(p.model->max_in_flight.load() == depth, "max in flight %d, depth %d", p.model->max_in_flight.load(), depth);
  CHECK(p.model->begins.load() == p.model->forward_calls.load());  // every pass went through begin/end
  std::set<int32_t> expected;
  for (int32_t i = 0; i < depth; ++i) expected.insert(i);
  CHECK(micro_batch_ids(*p.h.executor) == expected);
  CHECK(all_blocks_free(*p.h.executor));
}

void test_one_micro_batch_is_unpipelined() {
  ExecutorConfig c = pipeline_config();
  c.pp_micro_batches = 1;
  Pipelined p(2, c);
  const auto refs = enqueue_mixed(p.h, 5, 6);
  auto out = p.h.collect(ids_of(refs));
  for (const auto& [id, ref] : refs) CHECK(out[id].is_final && out[id].tokens == ref);
  CHECK(p.model->begins.load() == 0);  // forward() whole, as without pp
  CHECK(micro_batch_ids(*p.h.executor) == std::set<int32_t>{0});
  CHECK(all_blocks_free(*p.h.executor));
}

void test_negative_micro_batches_is_refused() {
  ExecutorConfig c = pipeline_config();
  c.pp_micro_batches = -1;
  CHECK_THROWS(Executor(std::make_unique<PipelinedFake>(2), c), "pp_micro_batches must be >= 0 (0: one per pipeline stage), got -1");
}

void test_cancel_in_flight() {
  Pipelined p(2, pipeline_config());
  const auto pa = prompt_of(6, 3), pb = prompt_of(7, 4);
  p.model->close_gate();
  p.h.executor->hold_iterations(0);
  const RequestId a = p.h.executor->enqueue(request_of(pa, 6, /*streaming=*/true));
  const RequestId b = p.h.executor->enqueue(request_of(pb, 6, /*streaming=*/true));
  p.h.executor->hold_iterations(-1);
  // Two sequences, two micro-batches: a's and b's prompts are both in flight, the loop waits on a's end.
  CHECK(p.model->wait_blocked_with(2));
  p.h.executor->cancel(b);
  p.model->open_gate();
  auto out = p.h.collect({a, b});
  CHECK(out[b].is_final && out[b].reason == FinishReason::cancelled && !out[b].has_error);
  CHECK(out[b].tokens.empty());  // its micro-batch came back after the cancel: no token
  CHECK(out[a].is_final && out[a].tokens == reference_greedy(*p.model, pa, 6));
  // a's six passes and the one b was in when cancelled: b never ran again.
  CHECK_MSG(p.model->forward_calls.load() == 7, "forward passes %d", p.model->forward_calls.load());
  CHECK(p.h.executor->wait_until_idle(kWait));
  CHECK(all_blocks_free(*p.h.executor));
  CHECK(p.h.executor->num_active_requests() == 0);
}

void test_kv_pressure(CapacitySchedulerPolicy policy) {
  ExecutorConfig c = pipeline_config();
  c.policy = policy;
  c.max_tokens_in_paged_kv_cache = 32;  // 8 blocks of 4; four requests growing to 4 blocks each do not fit at once
  Pipelined p(2, c);
  std::map<RequestId, std::vector<int32_t>> refs;
  p.h.executor->hold_iterations(0);
  for (int i = 0; i < 4; ++i) {
    const auto prompt = prompt_of(4, 40 + i);
    refs[p.h.executor->enqueue(request_of(prompt, 12, false))] = reference_greedy(*p.model, prompt, 12);
  }
  p.h.executor->hold_iterations(-1);
  auto out = p.h.collect(ids_of(refs));
  for (const auto& [id, ref] : refs) {
    CHECK_MSG(out[id].is_final && !out[id].has_error, "request %lld: %s", static_cast<long long>(id), out[id].error_message.c_str());
    CHECK(out[id].tokens == ref);
  }
  int32_t paused = 0;
  micro_batch_ids(*p.h.executor, &paused);
  if (policy == CapacitySchedulerPolicy::max_utilization) CHECK_MSG(paused > 0, "paused %d", paused);
  else CHECK(paused == 0);
  CHECK(p.model->max_in_flight.load() == 2);
  CHECK(all_blocks_free(*p.h.executor));
}

// Beam search in a pipeline: a lone beam request (its step feeds one token per live beam) and one next to greedy
// ones give the beams an unpipelined executor gives (the copy-on-write block copies ordered with the passes).
void test_beam_search() {
  ExecutorConfig c = pipeline_config();
  c.max_beam_width = 2;
  Request beam = request_of(prompt_of(6, 9), 7, false);
  beam.sampling.beam_width = 2;
  beam.num_return_sequences = 2;
  Harness plain(c);
  const RequestId ref_id = plain.executor->enqueue(beam);
  const auto ref = plain.collect({ref_id})[ref_id].last.result.output_token_ids;
  CHECK(ref.size() == 2);
  for (int others : {0, 3}) {
    Pipelined p(2, c);
    std::map<RequestId, std::vector<int32_t>> refs;
    p.h.executor->hold_iterations(0);
    const RequestId id = p.h.executor->enqueue(beam);
    for (int i = 0; i < others; ++i) {
      const auto prompt = prompt_of(5 + i, 60 + i);
      refs[p.h.executor->enqueue(request_of(prompt, 8, false))] = reference_greedy(*p.model, prompt, 8);
    }
    p.h.executor->hold_iterations(-1);
    std::set<RequestId> ids = ids_of(refs);
    ids.insert(id);
    auto out = p.h.collect(ids);
    CHECK_MSG(out[id].is_final && !out[id].has_error && out[id].last.result.output_token_ids == ref,
              "beam request next to %d greedy ones: %s", others, out[id].error_message.c_str());
    for (const auto& [rid, want] : refs) CHECK(out[rid].is_final && out[rid].tokens == want);
    CHECK(all_blocks_free(*p.h.executor));
  }
}

void test_shutdown_with_micro_batches_in_flight() {
  Pipelined p(2, pipeline_config());
  const auto pa = prompt_of(6, 5), pb = prompt_of(7, 6);
  p.model->close_gate();
  p.h.executor->hold_iterations(0);
  const RequestId a = p.h.executor->enqueue(request_of(pa, 50, /*streaming=*/true));
  const RequestId b = p.h.executor->enqueue(request_of(pb, 50, /*streaming=*/true));
  p.h.executor->hold_iterations(-1);
  CHECK(p.model->wait_blocked_with(2));
  std::thread stopper([&] { p.h.executor->shutdown(); });
  // Open only once the shutdown is in (so no more micro-batches begin): an empty request is refused as invalid
  // before that and as shut down after, and never queued.
  for (bool stopping = false; !stopping; std::this_thread::yield()) {
    try {
      p.h.executor->enqueue(Request{});
    } catch (const EngineError& e) {
      stopping = e.code() == ErrorCode::shutdown;
    }
  }
  p.model->open_gate();
  stopper.join();
  auto out = p.h.collect({a, b});
  for (RequestId id : {a, b}) {
    CHECK(out[id].is_final && out[id].reason == FinishReason::cancelled && !out[id].has_error);
    const auto ref = reference_greedy(*p.model, id == a ? pa : pb, 50);
    CHECK(out[id].tokens.size() < ref.size());
    CHECK(std::equal(out[id].tokens.begin(), out[id].tokens.end(), ref.begin()));  // what came out is right
  }
  CHECK(all_blocks_free(*p.h.executor));
  CHECK(p.h.executor->num_active_requests() == 0);
}

}  // namespace

TEST_MAIN({
  test_outputs_equal_reference_and_the_pipeline_fills(2);
  test_outputs_equal_reference_and_the_pipeline_fills(3);
  test_one_micro_batch_is_unpipelined();
  test_negative_micro_batches_is_refused();
  test_cancel_in_flight();
  test_kv_pressure(CapacitySchedulerPolicy::max_utilization);
  test_kv_pressure(CapacitySchedulerPolicy::guaranteed_no_evict);
  test_beam_search();
  test_shutdown_with_micro_batches_in_flight();
})
