// Guided requests wait in the queue until their guide's masks are all computed (executor-guide-wait.cpp), while
// every other request runs: with the grammar cache's background thread held (Executor::hold_guide_masks), a guided
// request at the head of the queue is never scheduled (no tokens, no KV block) and the requests behind it finish;
// once released it runs, with the output it has when nothing waits. A cancel or a shutdown ends a waiting request;
// a guide too large to wait for, TRTLLM_GRAMMAR_WAIT_FOR_MASKS=0 and TRTLLM_GRAMMAR_BACKGROUND_MASKS=0 start it at
// once; guides already done do not wait behind a pending one; the pipelined loop (pp micro-batches) waits the same
// way. Ordering by the hooks (held thread, wait_until_idle, collect), never by the clock.
#include <cstdlib>
#include <deque>
#include <mutex>
#include <regex>
#include <string>

#include "check.h"
#include "guided-test-util.h"

using namespace engine;
using namespace test;

namespace {

const std::string kGuide = R"(root ::= "a" [0-9]{2,4} "z")";
const std::regex kGuideText("a[0-9]{2,4}z");
const std::string kOtherGuide = R"(root ::= "[" ("true" | "false" | [0-9]+) "]")";

ExecutorConfig config() {
  ExecutorConfig c = small_config();
  c.guided_decoding = guided_config();
  return c;
}

Request waiting_request() { return guided_request(prompt_of(5, 1), 12, GuideType::ebnf_grammar, kGuide, /*streaming=*/true); }

Request plain_request() {
  Request r = make_request(prompt_of(6, 3), 10, /*streaming=*/true);
  r.output.exclude_input_from_output = true;
  return r;
}

// The guided request's output with nothing waiting (the reference the waited-for output must equal).
std::vector<int32_t> output_without_waiting() {
  ::setenv("TRTLLM_GRAMMAR_WAIT_FOR_MASKS", "0", 1);
  Harness h(config());
  ::unsetenv("TRTLLM_GRAMMAR_WAIT_FOR_MASKS");
  h.executor->hold_guide_masks(true);  // (pending or not, the request starts at once)
  const RequestId g = h.executor->enqueue(waiting_request());
  auto out = h.collect({g});
  CHECK(out[g].is_final && !out[g].has_error);
  return out[g].tokens;
}

// Waits until the loop sleeps, then checks it holds `id` queued and unscheduled: no response, no KV block.
void check_waiting(Harness& h, RequestId id, const std::map<RequestId, Outcome>& seen, int32_t active) {
  CHECK(h.executor->wait_until_idle(kWait));
  CHECK_MSG(seen.count(id) == 0, "the waiting request got %d responses", seen.count(id) ? seen.at(id).num_responses : 0);
  for (Response& r : h.executor->await_responses(std::chrono::milliseconds(0)))
    CHECK_MSG(r.request_id != id, "a response for the waiting request %llu", static_cast<unsigned long long>(id));
  CHECK(all_blocks_free(*h.executor));
  CHECK_MSG(h.executor->num_active_requests() == active, "%d active", h.executor->num_active_requests());
}

void waits_while_others_run(const std::vector<int32_t>& reference) {
  Harness h(config());
  h.executor->hold_guide_masks(true);
  // The guided request first, so a plain one admitted past it shows the queue's head does not block the others.
  const RequestId g = h.executor->enqueue(waiting_request());
  const RequestId p = h.executor->enqueue(plain_request());
  auto out = h.collect({p});
  CHECK(out[p].is_final && !out[p].has_error && !out[p].tokens.empty());
  CHECK(out[p].tokens == reference_greedy(*h.model, prompt_of(6, 3), 10));
  check_waiting(h, g, out, 1);
  const auto stats = h.executor->get_latest_iteration_stats();
  CHECK(!stats.empty() && stats.back().num_queued_requests == 1);
  h.executor->hold_guide_masks(false);  // the thread finishes the guide and wakes the loop
  auto done = h.collect({g});
  const std::string text = guided_text(done[g].tokens);
  CHECK_MSG(done[g].is_final && !done[g].has_error && done[g].tokens == reference, "waited for: '%s', without waiting: '%s'",
            text.c_str(), guided_text(reference).c_str());
  CHECK_MSG(std::regex_match(text, kGuideText), "'%s'", text.c_str());
  CHECK(h.executor->wait_until_idle(kWait));
  CHECK(all_blocks_free(*h.executor));
}

void cancel_while_waiting() {
  Harness h(config());
  h.executor->hold_guide_masks(true);
  const RequestId g = h.executor->enqueue(waiting_request());
  check_waiting(h, g, {}, 1);
  h.executor->cancel(g);
  auto out = h.collect({g});
  CHECK(out[g].is_final && out[g].reason == FinishReason::cancelled && out[g].tokens.empty());
  CHECK(all_blocks_free(*h.executor));
  CHECK(h.executor->num_active_requests() == 0);
  // The guide is still computed, and the next request of it runs.
  h.executor->hold_guide_masks(false);
  const RequestId again = h.executor->enqueue(waiting_request());
  auto next = h.collect({again});
  CHECK(next[again].is_final && !next[again].has_error && std::regex_match(guided_text(next[again].tokens), kGuideText));
}

void shutdown_while_waiting() {
  Harness h(config());
  h.executor->hold_guide_masks(true);
  const RequestId a = h.executor->enqueue(waiting_request());
  const RequestId b = h.executor->enqueue(waiting_request());
  check_waiting(h, a, {}, 2);
  h.executor->shutdown();  // returns (a hang fails the test's time limit); the thread stays held until destruction
  auto out = h.collect({a, b});
  for (RequestId id : {a, b}) CHECK(out[id].is_final && out[id].reason == FinishReason::cancelled && out[id].tokens.empty());
  CHECK(all_blocks_free(*h.executor));
}  // destroyed with the background thread held: it stops

// A request whose guide is not waited for runs to its end while the background thread is held.
void starts_at_once(const char* what, Harness& h, const std::vector<int32_t>& reference) {
  h.executor->hold_guide_masks(true);
  const RequestId g = h.executor->enqueue(waiting_request());
  auto out = h.collect({g});
  CHECK_MSG(out[g].is_final && !out[g].has_error && out[g].tokens == reference, "%s: '%s'", what,
            guided_text(out[g].tokens).c_str());
  h.executor->hold_guide_masks(false);
}

void not_waited_for(const std::vector<int32_t>& reference) {
  {
    ExecutorConfig c = config();
    c.guided_decoding->max_waited_work = 1;  // every guide is too large to wait for
    Harness h(c);
    starts_at_once("too large", h, reference);
  }
  {
    ::setenv("TRTLLM_GRAMMAR_BACKGROUND_MASKS", "0", 1);
    Harness h(config());
    ::unsetenv("TRTLLM_GRAMMAR_BACKGROUND_MASKS");
    starts_at_once("no background thread", h, reference);
  }
  {
    ExecutorConfig c = config();
    c.guided_decoding->max_waited_work = -1;
    CHECK_THROWS(Harness h(c), "guided_decoding.max_waited_work must be >= 0 (0: the default), got -1");
  }
}

// A guide whose masks are done does not wait behind one that is still pending.
void done_guides_run() {
  Harness h(config());
  const RequestId first = h.executor->enqueue(waiting_request());
  auto out = h.collect({first});  // (waited for the guide, which is done now)
  CHECK(out[first].is_final && !out[first].has_error);
  h.executor->hold_guide_masks(true);
  const RequestId other = h.executor->enqueue(guided_request(prompt_of(4, 2), 12, GuideType::ebnf_grammar, kOtherGuide));
  const RequestId same = h.executor->enqueue(waiting_request());
  auto ran = h.collect({same});
  CHECK(ran[same].is_final && ran[same].tokens == out[first].tokens);
  check_waiting(h, other, ran, 1);
  h.executor->hold_guide_masks(false);
  auto last = h.collect({other});
  CHECK_MSG(last[other].is_final && std::regex_match(guided_text(last[other].tokens),
                                                     std::regex(R"(\[(true|false|[0-9]+)\]?)")),
            "'%s'", guided_text(last[other].tokens).c_str());
}

// Pipelined pp: a model with two micro-batches in flight, each computed when it ends.
class TwoStageFake : public FakeModel {
 public:
  int32_t pipeline_depth() const override { return 2; }
  void forward_begin(const std::vector<SequenceChunk>& chunks) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(chunks);
  }
  void forward_end(ForwardOutput& out) override {
    std::vector<SequenceChunk> chunks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      chunks = std::move(pending_.front());
      pending_.pop_front();
    }
    FakeModel::forward(chunks, out);
  }

 private:
  std::mutex mu_;
  std::deque<std::vector<SequenceChunk>> pending_;
};

void pipelined_loop_waits(const std::vector<int32_t>& reference) {
  Harness h(std::make_unique<TwoStageFake>(), config());
  h.executor->hold_guide_masks(true);
  const RequestId g = h.executor->enqueue(waiting_request());
  const RequestId p = h.executor->enqueue(plain_request());
  auto out = h.collect({p});
  CHECK(out[p].is_final && out[p].tokens == reference_greedy(*h.model, prompt_of(6, 3), 10));
  check_waiting(h, g, out, 1);
  h.executor->hold_guide_masks(false);
  auto done = h.collect({g});
  CHECK_MSG(done[g].is_final && done[g].tokens == reference, "'%s'", guided_text(done[g].tokens).c_str());
}

}  // namespace

TEST_MAIN({
  const std::vector<int32_t> reference = output_without_waiting();
  CHECK_MSG(std::regex_match(guided_text(reference), kGuideText), "'%s'", guided_text(reference).c_str());
  waits_while_others_run(reference);
  cancel_while_waiting();
  shutdown_while_waiting();
  not_waited_for(reference);
  done_guides_run();
  pipelined_loop_waits(reference);
})
