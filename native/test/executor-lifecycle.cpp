// Cancellation (running and queued), queue_full, forward failures isolated to one iteration, shutdown with work
// in flight, and enqueue after shutdown.
#include <thread>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

static ExecutorConfig config() {
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 256;
  return c;
}

static void test_cancel_running_and_queued() {
  ExecutorConfig c = config();
  c.max_batch_size = 1;  // the second request has to wait in the queue
  Harness h(c);
  h.model->delay_ms = 5;
  const auto prompt = prompt_of(5, 1);
  const RequestId a = h.executor->enqueue(make_request(prompt, 200, /*streaming=*/true));
  const RequestId b = h.executor->enqueue(make_request(prompt, 200));
  // Wait for a few streamed tokens of `a`.
  std::map<RequestId, Outcome> out;
  for (int i = 0; i < 400 && out[a].tokens.size() < 3; ++i)
    for (auto& r : h.executor->await_responses(std::chrono::milliseconds(10))) Harness::absorb(out, std::move(r));
  CHECK(out[a].tokens.size() >= 3);
  CHECK(h.executor->kv_cache_stats().used_num_blocks > 0);
  CHECK(h.executor->num_active_requests() == 2);
  h.executor->cancel(b);  // queued
  h.executor->cancel(a);  // running
  h.executor->cancel(12345);  // unknown: ignored
  auto rest = h.collect({a, b}, 5);
  for (auto& kv : rest) {
    Outcome& o = out[kv.first];
    o.tokens.insert(o.tokens.end(), kv.second.tokens.begin(), kv.second.tokens.end());
    o.reason = kv.second.reason;
    o.is_final = kv.second.is_final;
  }
  CHECK(out[a].is_final && out[a].reason == FinishReason::cancelled);
  CHECK(out[b].is_final && out[b].reason == FinishReason::cancelled);
  CHECK(out[a].tokens.size() < 200);
  // The tokens streamed before the cancel are the true greedy prefix.
  const auto ref = reference_greedy(*h.model, prompt, static_cast<int32_t>(out[a].tokens.size()));
  CHECK(out[a].tokens == ref);
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
  // Cancelling a finished request is a no-op (no extra response).
  h.executor->cancel(a);
  CHECK(h.executor->await_responses(std::chrono::milliseconds(50)).empty());
}

static void test_queue_full() {
  ExecutorConfig c = config();
  c.max_batch_size = 1;
  c.max_queue_size = 2;
  Harness h(c);
  h.model->delay_ms = 20;
  const auto prompt = prompt_of(4, 2);
  const RequestId first = h.executor->enqueue(make_request(prompt, 50));
  // Let the first one start, so it no longer counts as queued.
  for (int i = 0; i < 100 && h.model->forward_calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
  auto out = h.collect({first, q1, q2});
  CHECK(out[q1].reason == FinishReason::length && out[q2].reason == FinishReason::length);
  // Room again once the queue drained.
  const RequestId again = h.executor->enqueue(make_request(prompt, 2));
  CHECK(h.collect({again})[again].is_final);
  CHECK(all_blocks_free(*h.executor));
}

static void test_forward_failure_is_isolated() {
  Harness h(config());
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
  ExecutorConfig c = config();
  c.max_batch_size = 2;
  Harness h(c);
  h.model->delay_ms = 3;
  std::set<RequestId> ids;
  for (int i = 0; i < 5; ++i) ids.insert(h.executor->enqueue(make_request(prompt_of(4 + i, i), 200, i % 2 == 0)));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  h.executor->shutdown();
  h.executor->shutdown();  // idempotent
  auto out = h.collect(ids, 2);
  for (RequestId id : ids) {
    CHECK_MSG(out[id].is_final, "request %llu got no final response", (unsigned long long)id);
    CHECK(out[id].reason == FinishReason::cancelled);
  }
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
  CHECK_THROWS(h.executor->enqueue(make_request(prompt_of(3, 0), 2)), "shut down");
  // await after shutdown returns promptly.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(h.executor->await_responses(std::chrono::milliseconds(2000)).empty());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1000));
}

static void test_idle_loop_sleeps() {
  Harness h(config());
  const RequestId a = h.executor->enqueue(make_request(prompt_of(3, 4), 3));
  CHECK(h.collect({a})[a].is_final);
  const int calls = h.model->forward_calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(h.model->forward_calls.load() == calls);  // no forward while idle
  CHECK(h.executor->get_latest_iteration_stats().size() == 3);  // one iteration per token, none while idle
}

TEST_MAIN({
  test_cancel_running_and_queued();
  test_queue_full();
  test_forward_failure_is_isolated();
  test_shutdown_with_work_in_flight();
  test_idle_loop_sleeps();
})
