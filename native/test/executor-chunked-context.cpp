// Chunked context (enable_chunked_context) through the executor and the FakeModel: prompts longer than what an
// iteration has left run in block-aligned chunks next to other requests' decodes, every iteration stays within
// max_num_tokens, and tokens, log probs and context logits equal an unchunked run (with and without reuse).
#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

static ExecutorConfig config(int32_t max_num_tokens, bool chunked, bool reuse) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = max_num_tokens;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.enable_chunked_context = chunked;
  c.enable_kv_cache_reuse = reuse;
  return c;
}

static std::vector<Request> workload() {
  std::vector<Request> rs;
  const int32_t lens[] = {5, 41, 9, 58, 30, 3};
  for (int i = 0; i < 6; ++i) {
    Request r = make_request(prompt_of(lens[i], 60 + i), 12 + i, i % 2 == 0);
    r.output.exclude_input_from_output = true;
    r.output.return_log_probs = true;
    r.output.return_context_logits = i == 1 || i == 3;
    rs.push_back(r);
  }
  rs[4].sampling.temperature = 1.0f;  // sampled: chunking must not change its random draws
  rs[4].sampling.top_k = 6;
  rs[4].sampling.seed = 5;
  return rs;
}

struct Run {
  std::vector<Outcome> outcomes;
  std::deque<IterationStats> stats;
};

// The short requests are queued first so their decodes are running while the long prompts are chunked.
static Run run(const ExecutorConfig& c) {
  Harness h(c);
  const auto rs = workload();
  const int order[] = {0, 2, 5, 1, 3, 4};
  std::vector<RequestId> ids;
  for (int i : order) ids.push_back(h.executor->enqueue(rs[static_cast<size_t>(i)]));
  auto out = h.collect(std::set<RequestId>(ids.begin(), ids.end()));
  Run res;
  res.outcomes.resize(rs.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    const Outcome& o = out[ids[k]];
    CHECK_MSG(o.is_final && !o.has_error, "request %d: final %d error '%s'", order[k], o.is_final, o.error_message.c_str());
    res.outcomes[static_cast<size_t>(order[k])] = o;
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].sampling.temperature > 0) continue;
    CHECK_MSG(res.outcomes[i].tokens == reference_greedy(*h.model, rs[i].input_token_ids, rs[i].max_tokens),
              "request %zu differs from the greedy reference", i);
  }
  res.stats = h.executor->get_latest_iteration_stats();
  CHECK(all_blocks_free(*h.executor));
  return res;
}

static void same_outputs(const Run& a, const Run& b, const char* what) {
  for (size_t i = 0; i < a.outcomes.size(); ++i) {
    CHECK_MSG(a.outcomes[i].tokens == b.outcomes[i].tokens, "%s: request %zu tokens differ", what, i);
    CHECK_MSG(a.outcomes[i].log_probs == b.outcomes[i].log_probs, "%s: request %zu log probs differ", what, i);
    CHECK_MSG(a.outcomes[i].last.result.context_logits == b.outcomes[i].last.result.context_logits,
              "%s: request %zu context logits differ", what, i);
  }
}

static void test_chunked_equals_unchunked() {
  const Run whole = run(config(512, false, false));
  const Run chunked = run(config(16, true, false));
  const Run chunked_reuse = run(config(16, true, true));
  same_outputs(whole, chunked, "chunked");
  same_outputs(whole, chunked_reuse, "chunked + reuse");
  CHECK(chunked.outcomes[3].last.result.context_logits.size() == 58u * 64u);

  int interleaved = 0, max_ctx = 0;
  for (const auto& s : chunked.stats) {
    const auto& b = s.inflight_batching_stats;
    CHECK_MSG(b.num_ctx_tokens + b.num_gen_requests <= 16, "iteration %lld: %lld context + %d decode tokens > 16",
              static_cast<long long>(s.iter), static_cast<long long>(b.num_ctx_tokens), b.num_gen_requests);
    max_ctx = std::max<int>(max_ctx, static_cast<int>(b.num_ctx_tokens));
    if (b.num_ctx_tokens > 0 && b.num_gen_requests > 0) ++interleaved;
  }
  CHECK_MSG(interleaved > 0, "no iteration mixed a prompt chunk with decodes");
  CHECK(max_ctx <= 16);
  // Unchunked, the 58-token prompt ran in one iteration.
  int64_t biggest = 0;
  for (const auto& s : whole.stats) biggest = std::max(biggest, s.inflight_batching_stats.num_ctx_tokens);
  CHECK(biggest >= 58);
}

// One long prompt alone: chunks of max_num_tokens, each a multiple of tokens_per_block, then the rest.
static void test_chunk_sizes() {
  Harness h(config(12, true, false));
  Request r = make_request(prompt_of(43, 3), 3);
  r.output.exclude_input_from_output = true;
  r.output.return_context_logits = true;
  const RequestId id = h.executor->enqueue(r);
  auto out = h.collect({id});
  CHECK(out[id].tokens == reference_greedy(*h.model, r.input_token_ids, 3));
  CHECK(out[id].last.result.context_logits.size() == 43u * 64u);
  std::vector<int64_t> chunks;
  for (const auto& s : h.executor->get_latest_iteration_stats())
    if (s.inflight_batching_stats.num_ctx_tokens > 0) chunks.push_back(s.inflight_batching_stats.num_ctx_tokens);
  CHECK_MSG((chunks == std::vector<int64_t>{12, 12, 12, 7}), "chunks: %zu", chunks.size());
  CHECK(all_blocks_free(*h.executor));
}

// A budget under one block can never hold a block-aligned chunk: refused at construction, naming both values.
static void test_config_check() {
  CHECK_THROWS(Harness h(config(3, true, false)), "max_num_tokens 3 is smaller than tokens_per_block 4");
  Harness ok(config(3, false, false));  // without chunking a small budget is fine (prompts <= 3 tokens)
  CHECK(true);
}

TEST_MAIN({
  test_chunked_equals_unchunked();
  test_chunk_sizes();
  test_config_check();
})
