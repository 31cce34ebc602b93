// Every invalid request is rejected at enqueue with EngineError(invalid_argument) and a message naming the field,
// the value and the limit; bad executor configs are rejected at construction; KV pool sizing rules.
#include <cmath>
#include <limits>

#include "check.h"
#include "executor-test-util.h"
#include "scheduling/validate.h"

using namespace engine;
using namespace test;

static void expect_invalid(Executor& e, const Request& r, const std::string& message) {
  bool threw = false;
  try {
    e.enqueue(r);
  } catch (const EngineError& err) {
    threw = true;
    CHECK_MSG(err.code() == ErrorCode::invalid_argument, "code %s for '%s'", error_code_name(err.code()), err.what());
    CHECK_MSG(std::string(err.what()) == message, "expected '%s', got '%s'", message.c_str(), err.what());
  }
  CHECK_MSG(threw, "no error for '%s'", message.c_str());
}

static void test_request_validation() {
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 64;
  c.max_seq_len = 256;
  c.tokens_per_block = 16;
  c.max_tokens_in_paged_kv_cache = 160;  // 10 blocks of 16
  Harness h(c, /*vocab=*/512, /*max_positions=*/1024);
  Executor& e = *h.executor;
  auto ok = [] { return make_request({1, 2, 3}, 4); };

  Request r = ok();
  r.input_token_ids.clear();
  expect_invalid(e, r, "input_token_ids is empty");
  r = ok();
  r.input_token_ids = {1, 2, 3, 700};
  expect_invalid(e, r, "input_token_ids[3] = 700 is out of range [0, 512) (vocab_size)");
  r.input_token_ids = {-1};
  expect_invalid(e, r, "input_token_ids[0] = -1 is out of range [0, 512) (vocab_size)");
  r = ok();
  r.max_tokens = 0;
  expect_invalid(e, r, "max_tokens must be > 0, got 0");
  r = ok();
  r.input_token_ids.assign(60, 5);
  r.max_tokens = 200;
  expect_invalid(e, r, "prompt length 60 + max_tokens 200 = 260 exceeds max_seq_len 256");
  r = ok();
  r.input_token_ids.assign(65, 5);
  expect_invalid(e, r, "prompt length 65 exceeds max_num_tokens 64 (enable chunked context to serve longer prompts)");
  r = ok();
  r.input_token_ids.assign(50, 5);
  r.max_tokens = 120;  // 170 tokens = 11 blocks > 10
  expect_invalid(e, r,
                 "prompt length 50 + max_tokens 120 = 170 tokens need 11 KV blocks but the KV cache has only 10 blocks "
                 "of 16 tokens (max_tokens_in_paged_kv_cache 160)");
  r = ok();
  r.sampling.temperature = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(e, r, "temperature must be a finite number >= 0, got nan");
  r.sampling.temperature = -0.5f;
  expect_invalid(e, r, "temperature must be a finite number >= 0, got -0.5");
  r = ok();
  r.sampling.top_p = 1.5f;
  expect_invalid(e, r, "top_p must be in (0, 1], got 1.5");
  r.sampling.top_p = 0.0f;
  expect_invalid(e, r, "top_p must be in (0, 1], got 0");
  r = ok();
  r.sampling.top_k = -1;
  expect_invalid(e, r, "top_k must be >= 0, got -1");
  r = ok();
  r.sampling.beam_width = 4;
  expect_invalid(e, r, "beam_width must be 1..max_beam_width (1), got 4");
  r.sampling.beam_width = 0;
  expect_invalid(e, r, "beam_width must be 1..max_beam_width (1), got 0");
  r = ok();
  r.end_id = 512;
  expect_invalid(e, r, "end_id = 512 is out of range [0, 512) (vocab_size); use -1 for none");
  r = ok();
  r.pad_id = -2;
  expect_invalid(e, r, "pad_id = -2 is out of range [0, 512) (vocab_size); use -1 for none");
  r = ok();
  r.stop_words = {{1, 600}};
  expect_invalid(e, r, "stop_words[0][1] = 600 is out of range [0, 512) (vocab_size)");
  r = ok();
  r.sampling.repetition_penalty = 0;
  expect_invalid(e, r, "repetition_penalty must be a finite number > 0, got 0");

  // Nothing was queued by the rejected requests; a valid one at the limits goes through.
  CHECK(e.num_active_requests() == 0);
  r = ok();
  r.input_token_ids.assign(64, 5);
  r.max_tokens = 96;  // exactly 160 tokens = 10 blocks
  const RequestId id = e.enqueue(r);
  auto out = h.collect({id});
  CHECK(out[id].is_final && out[id].reason == FinishReason::length);
  CHECK(all_blocks_free(e));
}

static void test_chunked_context_lifts_prompt_limit() {
  ValidationLimits lim;
  lim.vocab_size = 10;
  lim.max_seq_len = 100;
  lim.max_num_tokens = 8;
  lim.kv_num_blocks = 100;
  Request r = make_request(std::vector<int32_t>(20, 1), 5);
  CHECK_THROWS(validate_request(r, lim), "exceeds max_num_tokens 8");
  lim.enable_chunked_context = true;
  validate_request(r, lim);  // no throw
  CHECK(true);
}

static void test_chunked_context_runs() {
  // With chunked context a prompt longer than max_num_tokens runs in pieces and gives the reference output,
  // including complete context logits.
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 8;
  c.max_seq_len = 64;
  c.tokens_per_block = 4;
  c.enable_chunked_context = true;
  Harness h(c);
  const auto prompt = prompt_of(21, 7);
  Request r = make_request(prompt, 5);
  r.output.exclude_input_from_output = true;
  r.output.return_context_logits = true;
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  CHECK(out[id].tokens == reference_greedy(*h.model, prompt, 5));
  CHECK(out[id].last.result.context_logits.size() == prompt.size() * 64);
  for (const auto& s : h.executor->get_latest_iteration_stats()) CHECK(s.inflight_batching_stats.num_ctx_tokens <= 8);
  CHECK(all_blocks_free(*h.executor));
}

static void test_config_and_pool_sizing() {
  {
    ExecutorConfig c;
    c.max_batch_size = 3;
    c.max_seq_len = 100;
    c.tokens_per_block = 8;
    Harness h(c);  // default: max_batch_size * max_seq_len = 300 tokens -> 38 blocks
    CHECK(h.executor->kv_cache_stats().max_num_blocks == 38);
    CHECK(h.executor->kv_cache_stats().tokens_per_block == 8);
  }
  {
    ExecutorConfig c;
    c.tokens_per_block = 4;
    c.kv_cache_memory_bytes = 16 * 40;  // the fake model takes 16 bytes per token -> 40 tokens -> 10 blocks
    Harness h(c);
    CHECK(h.executor->kv_cache_stats().max_num_blocks == 10);
    CHECK(h.executor->config().max_seq_len == 512);  // from the model's max_position_embeddings
  }
  {
    ExecutorConfig c;
    c.max_tokens_in_paged_kv_cache = 33;
    c.kv_cache_memory_bytes = 1 << 20;  // ignored: the explicit token count wins
    c.tokens_per_block = 16;
    Harness h(c);
    CHECK(h.executor->kv_cache_stats().max_num_blocks == 3);
  }
  ExecutorConfig bad;
  bad.max_batch_size = 0;
  CHECK_THROWS(Harness h(bad), "max_batch_size must be > 0, got 0");
  bad = ExecutorConfig();
  bad.tokens_per_block = 0;
  CHECK_THROWS(Harness h(bad), "tokens_per_block must be > 0, got 0");
  bad = ExecutorConfig();
  bad.max_seq_len = 513;
  CHECK_THROWS(Harness h(bad), "max_seq_len 513 exceeds the model's max_position_embeddings 512");
}

TEST_MAIN({
  test_request_validation();
  test_chunked_context_lifts_prompt_limit();
  test_chunked_context_runs();
  test_config_and_pool_sizing();
})
