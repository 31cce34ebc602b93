// Helpers for executor tests: build an executor over a FakeModel, and collect every response of a set of requests
// until each has its final one (or kWait passes: a hung loop, which the tests then report as a failure).
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "executor/executor.h"
#include "fake-model.h"

namespace test {

// The bound of every wait in the executor tests (responses, the test hook's wait_until_held / _idle): only a hung
// loop reaches it, never a slow or busy machine, so it is not a timing assertion (ctest's own limit is 600 s).
inline constexpr std::chrono::milliseconds kWait{300000};

struct Outcome {
  std::vector<int32_t> tokens;   // streaming: concatenation of every response; otherwise the final response's
  std::vector<float> log_probs;  // same rule
  engine::FinishReason reason = engine::FinishReason::not_finished;
  int num_responses = 0;
  bool is_final = false;
  bool has_error = false;
  engine::ErrorCode error_code = engine::ErrorCode::internal;
  std::string error_message;
  engine::Response last;
};

struct Harness {
  FakeModel* model = nullptr;  // owned by the executor
  std::unique_ptr<engine::Executor> executor;

  explicit Harness(engine::ExecutorConfig config, int32_t vocab = 64, int32_t max_positions = 512)
      : Harness(std::make_unique<FakeModel>(vocab, max_positions), config) {}
  // Over a FakeModel subclass (executor-pipeline.cpp's pipelined one).
  // With a draft model (speculation by draft model), when given.
  Harness(std::unique_ptr<FakeModel> m, engine::ExecutorConfig config, std::unique_ptr<engine::Model> draft = nullptr) {
    model = m.get();
    executor = std::make_unique<engine::Executor>(std::move(m), config, std::move(draft));
  }

  static void absorb(std::map<engine::RequestId, Outcome>& out, engine::Response&& r) {
    Outcome& o = out[r.request_id];
    ++o.num_responses;
    if (r.has_error) {
      o.has_error = true;
      o.error_code = r.error_code;
      o.error_message = r.error_message;
    } else if (!r.result.output_token_ids.empty()) {
      const auto& t = r.result.output_token_ids[0];
      // Streaming responses carry deltas; a non-streaming request only ever gets one (final) response.
      o.tokens.insert(o.tokens.end(), t.begin(), t.end());
      if (!r.result.log_probs.empty())
        o.log_probs.insert(o.log_probs.end(), r.result.log_probs[0].begin(), r.result.log_probs[0].end());
      if (!r.result.finish_reasons.empty()) o.reason = r.result.finish_reasons[0];
    }
    o.is_final = r.result.is_final;
    o.last = std::move(r);
  }

  // Waits until every id in `ids` had a final response.
  std::map<engine::RequestId, Outcome> collect(const std::set<engine::RequestId>& ids);
};

// Waits until every id in `ids` had a final response from `e` (any executor: over a FakeModel or a real model).
inline std::map<engine::RequestId, Outcome> collect(engine::Executor& e, const std::set<engine::RequestId>& ids) {
  std::map<engine::RequestId, Outcome> out;
  std::set<engine::RequestId> pending = ids;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto& r : e.await_responses(std::chrono::milliseconds(100))) {
      const auto id = r.request_id;
      const bool fin = r.result.is_final;
      Harness::absorb(out, std::move(r));
      if (fin) pending.erase(id);
    }
  }
  return out;
}

inline std::map<engine::RequestId, Outcome> Harness::collect(const std::set<engine::RequestId>& ids) {
  return test::collect(*executor, ids);
}

inline engine::Request make_request(std::vector<int32_t> prompt, int32_t max_tokens, bool streaming = false) {
  engine::Request r;
  r.input_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.streaming = streaming;
  r.sampling.temperature = 0;  // greedy unless a test says otherwise
  return r;
}

inline std::vector<int32_t> prompt_of(int32_t len, int32_t salt, int32_t vocab = 64) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back((i * 7 + salt * 13 + 1) % vocab);
  return p;
}

// What greedy decoding of the fake model produces for `prompt`, computed without the executor.
inline std::vector<int32_t> reference_greedy(const FakeModel& m, std::vector<int32_t> prompt, int32_t max_tokens,
                                             int32_t end_id = -1) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    const int32_t t = m.expected_next(prompt);
    if (t == end_id) break;
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

// The small executor the lifecycle and hold tests share: 4 requests, 256 tokens per iteration, 4-token blocks.
inline engine::ExecutorConfig small_config() {
  engine::ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 256;
  return c;
}


inline bool all_blocks_free(const engine::Executor& e) {
  const auto s = e.kv_cache_stats(), d = e.draft_kv_cache_stats();
  return s.free_num_blocks == s.max_num_blocks && s.used_num_blocks == 0 && d.free_num_blocks == d.max_num_blocks &&
         d.used_num_blocks == 0;
}

}  // namespace test
