// The test hook Executor::hold_iterations: a held loop runs no iteration and queues enqueues, still applies cancels
// at once (so a test sees a cancel land while nothing else moves), and still shuts down. The other executor tests
// use it to fix the order of events instead of sleeping.
#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

// Responses already delivered (poll mode: a held loop has delivered everything it produced).
static std::map<RequestId, Outcome> drain(Executor& e, std::map<RequestId, Outcome> out = {}) {
  for (auto& r : e.await_responses(std::chrono::milliseconds(0))) Harness::absorb(out, std::move(r));
  return out;
}

static void test_hold_zero_runs_nothing_until_released() {
  Harness h(small_config());
  h.executor->hold_iterations(0);
  CHECK(h.executor->wait_until_held(kWait));
  const auto prompt = prompt_of(5, 1);
  const RequestId id = h.executor->enqueue(make_request(prompt, 4, /*streaming=*/true));
  CHECK(h.executor->wait_until_held(kWait));  // the enqueue woke the loop; it is holding again
  CHECK(h.model->forward_calls.load() == 0);
  CHECK(h.executor->iterations_run() == 0);
  CHECK(drain(*h.executor).empty());
  CHECK(h.executor->num_active_requests() == 1);
  h.executor->hold_iterations(-1);
  auto out = h.collect({id});
  CHECK(out[id].is_final && out[id].reason == FinishReason::length);
  CHECK(out[id].tokens == reference_greedy(*h.model, prompt, 4));
  CHECK(h.executor->iterations_run() == 4);
}

static void test_hold_one_runs_exactly_one_iteration() {
  Harness h(small_config());
  const auto pa = prompt_of(5, 2), pb = prompt_of(7, 3);
  // Both queued while held, so that the one iteration sees both.
  h.executor->hold_iterations(0);
  const RequestId a = h.executor->enqueue(make_request(pa, 6, /*streaming=*/true));
  const RequestId b = h.executor->enqueue(make_request(pb, 6, /*streaming=*/true));
  h.executor->hold_iterations(1);
  CHECK(h.executor->wait_until_held(kWait));
  CHECK(h.executor->iterations_run() == 1);
  CHECK(h.model->forward_calls.load() == 1);
  auto out = drain(*h.executor);
  // One iteration: both prompts ran (one batch), each produced its first token.
  CHECK(out[a].tokens == reference_greedy(*h.model, pa, 1));
  CHECK(out[b].tokens == reference_greedy(*h.model, pb, 1));
  h.executor->hold_iterations(2);
  CHECK(h.executor->wait_until_held(kWait));
  CHECK(h.executor->iterations_run() == 3);
  out = drain(*h.executor, out);
  CHECK(out[a].tokens == reference_greedy(*h.model, pa, 3));
  h.executor->hold_iterations(-1);
  CHECK(h.executor->wait_until_idle(kWait));
  out = drain(*h.executor, out);
  CHECK(out[a].is_final && out[a].tokens == reference_greedy(*h.model, pa, 6));
  CHECK(out[b].is_final && out[b].tokens == reference_greedy(*h.model, pb, 6));
  CHECK(all_blocks_free(*h.executor));
}

static void test_cancel_while_held() {
  Harness h(small_config());
  const auto prompt = prompt_of(6, 4);
  h.executor->hold_iterations(2);
  const RequestId id = h.executor->enqueue(make_request(prompt, 50, /*streaming=*/true));
  CHECK(h.executor->wait_until_held(kWait));
  h.executor->cancel(id);
  CHECK(h.executor->wait_until_held(kWait));  // the cancel applied, and the loop holds again
  CHECK(h.executor->num_active_requests() == 0);
  CHECK(all_blocks_free(*h.executor));
  auto out = drain(*h.executor);
  CHECK(out[id].is_final && out[id].reason == FinishReason::cancelled);
  CHECK(out[id].tokens.size() == 2);  // the two iterations' tokens, then the final response with none
  CHECK(h.model->forward_calls.load() == 2);
  CHECK(h.executor->iterations_run() == 2);
  // Released: nothing left to run.
  h.executor->hold_iterations(-1);
  CHECK(h.executor->wait_until_idle(kWait));
  CHECK(h.model->forward_calls.load() == 2);
}

static void test_cancel_while_held_before_start() {
  Harness h(small_config());
  h.executor->hold_iterations(0);
  const RequestId id = h.executor->enqueue(make_request(prompt_of(4, 5), 8));
  h.executor->cancel(id);
  h.executor->hold_iterations(-1);
  auto out = h.collect({id});
  CHECK(out[id].is_final && out[id].reason == FinishReason::cancelled);
  CHECK(h.model->forward_calls.load() == 0);  // arrived and cancelled in one go, never scheduled
  CHECK(all_blocks_free(*h.executor));
}

static void test_shutdown_while_held() {
  Harness h(small_config());
  h.executor->hold_iterations(1);
  const RequestId a = h.executor->enqueue(make_request(prompt_of(5, 6), 40, /*streaming=*/true));
  CHECK(h.executor->wait_until_held(kWait));
  const RequestId b = h.executor->enqueue(make_request(prompt_of(5, 7), 40));  // queued behind the hold
  h.executor->shutdown();
  auto out = h.collect({a, b});
  CHECK(out[a].is_final && out[a].reason == FinishReason::cancelled);
  CHECK(out[b].is_final && out[b].reason == FinishReason::cancelled);
  CHECK(h.model->forward_calls.load() == 1);
  CHECK(!h.executor->wait_until_held(std::chrono::milliseconds(0)));  // the loop is gone
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
}

TEST_MAIN({
  test_hold_zero_runs_nothing_until_released();
  test_hold_one_runs_exactly_one_iteration();
  test_cancel_while_held();
  test_cancel_while_held_before_start();
  test_shutdown_while_held();
})
