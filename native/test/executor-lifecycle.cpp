// Cancellation (running and queued), queue_full, forward failures isolated to one iteration, shutdown with work
// in flight, enqueue after shutdown, and the models freed after it.
#include <atomic>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

static void test_cancel_running_and_queued() {
  ExecutorConfig c = small_config();
  c.max_batch_size = 1;  // the second request has to wait in the queue
  Harness h(c);
  const auto prompt = prompt_of(5, 1);
  h.executor->hold_iterations(3);  // `a` streams three tokens, then the loop holds
  const RequestId a = h.executor->enqueue(make_request(prompt, 200, /*streaming=*/true));
  const RequestId b = h.executor->enqueue(make_request(prompt, 200));
  CHECK(h.executor->wait_until_held(kWait));
  std::map<RequestId, Outcome> out;
  for (auto& r : h.executor->await_responses(std::chrono::milliseconds(0))) Harness::absorb(out, std::move(r));
  CHECK(out[a].tokens.size() == 3);
  CHECK(h.executor->kv_cache_stats().used_num_blocks > 0);
  CHECK(h.executor->num_active_requests() == 2);
  h.executor->cancel(b);  // queued
  h.executor->cancel(a);  // running
  h.executor->cancel(12345);  // unknown: ignored
  h.executor->hold_iterations(-1);
  auto rest = h.collect({a, b});
  for (auto& kv : rest) {
    Outcome& o = out[kv.first];
    o.tokens.insert(o.tokens.end(), kv.second.tokens.begin(), kv.second.tokens.end());
    o.reason = kv.second.reason;
    o.is_final = kv.second.is_final;
  }
  CHECK(out[a].is_final && out[a].reason == FinishReason::cancelled);
  CHECK(out[b].is_final && out[b].reason == FinishReason::cancelled);
  CHECK(out[a].tokens.size() == 3);  // the cancels were applied before any further iteration
  // The tokens streamed before the cancel are the true greedy prefix.
  const auto ref = reference_greedy(*h.model, prompt, static_cast<int32_t>(out[a].tokens.size()));
  CHECK(out[a].tokens == ref);
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
  // Cancelling a finished request is a no-op (no extra response): a cancel is applied before the iteration that
  // follows it, so once a later request finished, any response to the cancel would have come first.
  h.executor->cancel(a);
  const RequestId later = h.executor->enqueue(make_request(prompt, 1));
  const auto after = h.collect({later});
  CHECK(after.count(a) == 0);
  CHECK(after.size() == 1);
}

static void test_queue_full() {
  ExecutorConfig c = small_config();
  c.max_batch_size = 1;
  c.max_queue_size = 2;
  Harness h(c);
  const auto prompt = prompt_of(4, 2);
  // The first one starts (one iteration), so it no longer counts as queued; then the loop holds.
  h.executor->hold_iterations(1);
  const RequestId first = h.executor->enqueue(make_request(prompt, 50));
  CHECK(h.executor->wait_until_held(kWait));
  const RequestId q1 = h.executor->enqueue(make_request(prompt, 5));
  const RequestId q2 = h.executor->enqueue(make_request(prompt, 5));
  bool threw = false;
  try {
    h.executor->enqueue(make_request(prompt, 5));
  } catch (const EngineError& e) {
    threw = true;
    CHECK(e.code() == ErrorCode::queue_full);
    CHECK(std::string(e.what()) == "Maximum queue size of 2 has been reached");
  }
  CHECK(threw);
  h.executor->cancel(first);
  h.executor->hold_iterations(-1);
  auto out = h.collect({first, q1, q2});
  CHECK(out[q1].reason == FinishReason::length && out[q2].reason == FinishReason::length);
  // Room again once the queue drained.
  const RequestId again = h.executor->enqueue(make_request(prompt, 2));
  CHECK(h.collect({again})[again].is_final);
  CHECK(all_blocks_free(*h.executor));
}

static void test_forward_failure_is_isolated() {
  Harness h(small_config());
  h.model->fail_on_call = 3;
  const auto prompt = prompt_of(6, 3);
  const RequestId a = h.executor->enqueue(make_request(prompt, 10));
  auto out = h.collect({a});
  CHECK(out[a].has_error);
  CHECK(out[a].is_final);
  CHECK(out[a].error_message.find("injected forward failure") != std::string::npos);
  CHECK(all_blocks_free(*h.executor));
  // The loop survived: the next request completes normally.
  const RequestId b = h.executor->enqueue(make_request(prompt, 10));
  out = h.collect({b});
  CHECK(!out[b].has_error && out[b].reason == FinishReason::length);
  std::vector<int32_t> full = prompt;
  const auto gen = reference_greedy(*h.model, prompt, 10);
  full.insert(full.end(), gen.begin(), gen.end());
  CHECK(out[b].tokens == full);
  CHECK(h.executor->num_active_requests() == 0);
}

static void test_shutdown_with_work_in_flight() {
  ExecutorConfig c = small_config();
  c.max_batch_size = 2;
  Harness h(c);
  std::set<RequestId> ids;
  // Two requests running for a few iterations, three queued, when shutdown comes.
  h.executor->hold_iterations(0);
  for (int i = 0; i < 5; ++i) ids.insert(h.executor->enqueue(make_request(prompt_of(4 + i, i), 200, i % 2 == 0)));
  h.executor->hold_iterations(3);
  CHECK(h.executor->wait_until_held(kWait));
  CHECK(h.model->forward_calls.load() == 3);
  h.executor->shutdown();
  h.executor->shutdown();  // idempotent
  auto out = h.collect(ids);
  for (RequestId id : ids) {
    CHECK_MSG(out[id].is_final, "request %llu got no final response", (unsigned long long)id);
    CHECK(out[id].reason == FinishReason::cancelled);
  }
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
  CHECK_THROWS(h.executor->enqueue(make_request(prompt_of(3, 0), 2)), "shut down");
  // await after shutdown returns (the loop is done), with nothing.
  CHECK(h.executor->await_responses(kWait).empty());
}

static void test_idle_loop_sleeps() {
  Harness h(small_config());
  const RequestId a = h.executor->enqueue(make_request(prompt_of(3, 4), 3));
  CHECK(h.collect({a})[a].is_final);
  // Asleep once the request is done: no forward and no stats while idle.
  CHECK(h.executor->wait_until_idle(kWait));
  CHECK(h.model->forward_calls.load() == 3);
  CHECK(h.executor->iterations_run() == 3);
  CHECK(h.executor->get_latest_iteration_stats().size() == 3);  // one iteration per token, none while idle
}

// free_models after shutdown: the model and the draft model are destroyed (a GPU's memory would be free for the
// next load), and what the executor reports stays readable. Before shutdown it frees nothing.
static void test_free_models() {
  static std::atomic<int> destroyed{0};
  struct Counted : FakeModel {
    using FakeModel::FakeModel;
    ~Counted() override { ++destroyed; }
  };
  Harness h(std::make_unique<Counted>(64, 512), small_config(), std::make_unique<Counted>(64, 512));
  const RequestId a = h.executor->enqueue(make_request(prompt_of(3, 4), 4));
  CHECK(h.collect({a})[a].tokens.size() == 3 + 4);  // (prompt + output)
  h.executor->free_models();
  CHECK(destroyed.load() == 0);  // the loop still runs
  h.executor->shutdown();
  h.executor->free_models();
  CHECK(destroyed.load() == 2);
  CHECK(h.executor->model_config().vocab_size == 64 && h.executor->kv_cache_stats().max_num_blocks > 0);
  h.executor->free_models();  // again: nothing left to free
  CHECK(destroyed.load() == 2);
}

TEST_MAIN({
  test_free_models();
  test_cancel_running_and_queued();
  test_queue_full();
  test_forward_failure_is_isolated();
  test_shutdown_with_work_in_flight();
  test_idle_loop_sleeps();
})
