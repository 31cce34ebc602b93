// Sliding windows in the executor (max_attention_window_size, kv-window.h): a windowed sequence's blocks before its
// window go back to the pool after every forward, yet its tokens equal a run of the same model that keeps every
// block and only masks (the model forward driven directly). A long request fits a pool far smaller than its
// lifetime only because of the window; bad window values are refused naming the field.
#include <algorithm>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

namespace {

const std::string& llama_dir() {
  static const std::string dir = check::repo_root + "/test/fixtures/models/tiny-llama";
  return dir;
}

std::unique_ptr<Model> tiny_llama() {
  LoadOptions o;
  o.num_threads = 2;
  return load_model(llama_dir(), o);
}

// Greedy tokens of the model driven by hand: every block kept, the window applied only as a mask.
std::vector<int32_t> masked_reference(const std::vector<int32_t>& prompt, int32_t n, int32_t window) {
  auto m = tiny_llama();
  const int32_t tpb = 4, V = m->config().vocab_size;
  const int32_t total = static_cast<int32_t>(prompt.size()) + n;
  m->allocate_kv((total + tpb - 1) / tpb, tpb);
  std::vector<int32_t> blocks;
  for (int32_t b = 0; b < (total + tpb - 1) / tpb; ++b) blocks.push_back(b);
  std::vector<int32_t> out, feed = prompt;
  int32_t past = 0;
  for (int32_t i = 0; i < n; ++i) {
    SequenceChunk c;
    c.tokens = feed;
    c.past_len = past;
    c.block_ids = blocks;
    c.window = window;
    ForwardOutput fo;
    m->forward({c}, fo);
    const float* row = fo.logits.data() + static_cast<size_t>(fo.first_row[0]) * V;
    const int32_t tok = static_cast<int32_t>(std::max_element(row, row + V) - row);
    out.push_back(tok);
    past += static_cast<int32_t>(feed.size());
    feed = {tok};
  }
  return out;
}

Request windowed(std::vector<int32_t> prompt, int32_t max_tokens, int32_t window) {
  Request r;
  r.input_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.output.exclude_input_from_output = true;
  r.max_attention_window = window;
  return r;
}

std::vector<int32_t> prompt_tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(3 + (seed * 37 + i * 11) % 250);
  return p;
}

// Runs both requests through one executor; returns each one's tokens and the most blocks any iteration held.
struct Run {
  std::vector<std::vector<int32_t>> tokens;
  int32_t max_used = 0;
  std::string error;
};

Run run(const std::vector<Request>& requests, int32_t server_window, bool reuse, CapacitySchedulerPolicy policy) {
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 64;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.max_tokens_in_paged_kv_cache = 48;  // 12 blocks: each request's lifetime alone needs 20
  c.max_attention_window = server_window;
  c.enable_kv_cache_reuse = reuse;
  c.policy = policy;
  Executor e(tiny_llama(), c);
  Run res;
  std::vector<RequestId> ids;
  try {
    for (const Request& r : requests) ids.push_back(e.enqueue(r));
  } catch (const EngineError& err) {
    res.error = err.what();
    return res;
  }
  std::map<RequestId, std::vector<int32_t>> got;
  size_t finals = 0;
  const auto deadline = std::chrono::steady_clock::now() + test::kWait;
  while (finals < ids.size() && std::chrono::steady_clock::now() < deadline)
    for (Response& r : e.await_responses(std::chrono::milliseconds(100))) {
      CHECK_MSG(!r.has_error, "request %llu failed: %s", static_cast<unsigned long long>(r.request_id),
                r.error_message.c_str());
      if (r.result.is_final) {
        ++finals;
        got[r.request_id] = r.has_error ? std::vector<int32_t>{} : r.result.output_token_ids[0];
      }
    }
  CHECK_MSG(finals == ids.size(), "%zu of %zu requests finished", finals, ids.size());
  for (const auto& s : e.get_latest_iteration_stats())
    res.max_used = std::max(res.max_used, s.kv_cache_stats.used_num_blocks);
  for (RequestId id : ids) res.tokens.push_back(got[id]);
  return res;
}

}  // namespace

TEST_MAIN({
  const auto p1 = prompt_tokens(20, 1), p2 = prompt_tokens(9, 2);
  const int32_t n = 60;
  const auto ref1 = masked_reference(p1, n, 6), ref2 = masked_reference(p2, n, 10);
  // The window changes the output: were it ignored, the tokens would be the unwindowed ones.
  CHECK(ref1 != masked_reference(p1, n, 0));

  for (bool reuse : {false, true})
    for (CapacitySchedulerPolicy policy : {CapacitySchedulerPolicy::guaranteed_no_evict,
                                           CapacitySchedulerPolicy::max_utilization}) {
      // Request 1 narrows the server's window of 10 to 6; request 2 takes the server's.
      Run r = run({windowed(p1, n, 6), windowed(p2, n, 0)}, 10, reuse, policy);
      CHECK_MSG(r.error.empty(), "enqueue refused: %s", r.error.c_str());
      if (!r.error.empty()) continue;
      CHECK_MSG(r.tokens[0] == ref1, "request 1 (window 6, reuse %d) differs from the masked reference", reuse);
      CHECK_MSG(r.tokens[1] == ref2, "request 2 (window 10, reuse %d) differs from the masked reference", reuse);
      // A decode step holds at most ceil(window / 4) + 1 blocks; the prompts' first chunks hold their prompts.
      CHECK_MSG(r.max_used <= 12 && r.max_used >= 2, "max blocks used %d", r.max_used);
    }

  // Without a window the same request cannot fit the pool: the window is what admits it.
  Run unwindowed = run({windowed(p1, n, 0)}, 0, false, CapacitySchedulerPolicy::guaranteed_no_evict);
  CHECK_MSG(unwindowed.error.find("need 20 KV blocks but the KV cache has only 12 blocks") != std::string::npos,
            "got '%s'", unwindowed.error.c_str());

  Run bad = run({windowed(p2, 4, -3)}, 0, false, CapacitySchedulerPolicy::guaranteed_no_evict);
  CHECK_MSG(bad.error.find("max_attention_window_size must be >= 1 (or 0: the server's), got -3") != std::string::npos,
            "got '%s'", bad.error.c_str());
  ExecutorConfig c;
  c.max_attention_window = -1;
  CHECK_THROWS(Executor(tiny_llama(), c), "max_attention_window must be >= 0 (0: the model's own windows), got -1");
})
