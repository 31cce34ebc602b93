// P-tuning on the GPU (cuda-decoder-forward.cpp's stage_virtual_rows): through the executor over the CUDA model, a
// prompt whose virtual tokens take rows equal to real tokens' embeddings — rounded to the model's dtype, as the GPU
// holds its embedding — gives what the prompt with those real tokens gives (greedy tokens; context logits within
// float rounding of one another, 0 expected), for a model without and with an embedding scale and one with learned
// positions; another table changes the logits from the first virtual position on; a batch mixing a tabled and an
// untabled request gives each its own output alone. Decode steps after such a prompt replay CUDA graphs as usual.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "executor-test-util.h"
#include "prompt-table-test-util.h"

using namespace engine;

namespace {

std::unique_ptr<Executor> make_executor(const std::string& dir) {
  LoadOptions o = cudatest::options(Device::cuda);
  o.dtype = "bfloat16";
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  return std::make_unique<Executor>(load_model(dir, o), c);
}

Request request(std::vector<int32_t> prompt, std::shared_ptr<const PromptTable> table) {
  Request r = test::make_request(std::move(prompt), 10);
  r.output.return_context_logits = true;
  r.prompt_table = std::move(table);
  return r;
}

// Runs the requests as one batch (enqueued together) and returns their outcomes in order.
std::vector<test::Outcome> run(Executor& e, const std::vector<Request>& requests) {
  std::vector<RequestId> ids;
  for (const Request& r : requests) ids.push_back(e.enqueue(r));
  const std::map<RequestId, test::Outcome> out = test::collect(e, std::set<RequestId>(ids.begin(), ids.end()));
  std::vector<test::Outcome> got;
  for (RequestId id : ids) got.push_back(out.at(id));
  return got;
}

// The table's values as the GPU holds the embedding: bf16.
std::shared_ptr<const PromptTable> rounded(const std::shared_ptr<const PromptTable>& t) {
  std::vector<float> data(t->data);
  for (float& v : data) v = bf16_to_f32(f32_to_bf16(v));
  return make_prompt_table(t->rows, t->hidden, std::move(data));
}

const std::vector<int32_t> kRowTokens = {17, 250, 3, 99};
std::vector<int32_t> virtual_prompt(int32_t vocab) { return {5, vocab + 0, 8, vocab + 2, vocab + 1, vocab + 3, 12, vocab + 0, 40}; }
std::vector<int32_t> real_prompt() { return {5, 17, 8, 3, 250, 99, 12, 17, 40}; }

void check_model(const std::string& dir, const char* name) {
  auto e = make_executor(dir);
  const int32_t vocab = e->model_config().vocab_size, hidden = e->model_config().hidden_size;
  auto rows = rounded(test::table_of_tokens(dir, kRowTokens));
  const test::Outcome want = run(*e, {request(real_prompt(), nullptr)})[0];
  const test::Outcome got = run(*e, {request(virtual_prompt(vocab), rows)})[0];
  CHECK_MSG(!got.has_error && !want.has_error, "%s: %s%s", name, got.error_message.c_str(), want.error_message.c_str());
  const auto& gl = got.last.result.context_logits;
  const auto& wl = want.last.result.context_logits;
  const double err = gl.size() == wl.size() && !wl.empty() ? cudatest::rel_err(gl.data(), wl.data(), wl.size()) : 1.0;
  const size_t n = real_prompt().size();
  const std::vector<int32_t> got_gen(got.tokens.begin() + n, got.tokens.end()), want_gen(want.tokens.begin() + n, want.tokens.end());
  std::printf("%s on the GPU: virtual tokens against their rows' real tokens: context logits rel err %.2e, %zu / %zu tokens\n",
              name, err, got_gen.size(), want_gen.size());
  CHECK_MSG(err < 1e-6, "%s: context logits differ (rel err %.3e)", name, err);
  CHECK_MSG(got_gen == want_gen && !got_gen.empty(), "%s: greedy tokens differ", name);

  // Another table changes the logits from the first virtual position on; the row before it is the same.
  auto other_table = test::random_table(4, hidden, 7, 2.0f);
  const test::Outcome other = run(*e, {request(virtual_prompt(vocab), other_table)})[0];
  CHECK(!other.has_error);
  const auto& ol = other.last.result.context_logits;
  CHECK_MSG(ol.size() == wl.size() && std::equal(ol.begin(), ol.begin() + vocab, wl.begin()),
            "%s: the row before any virtual token is the same", name);
  CHECK_MSG(ol.size() == wl.size() && !std::equal(ol.begin() + vocab, ol.begin() + 2 * vocab, wl.begin() + vocab),
            "%s: another table changes the logits", name);
  // One batch: the other table's request beside an untabled one, each as it ran alone.
  const std::vector<test::Outcome> both = run(*e, {request(virtual_prompt(vocab), other_table), request(real_prompt(), nullptr)});
  CHECK_MSG(both[0].tokens == other.tokens && both[1].tokens == want.tokens, "%s: a mixed batch gives each its own tokens", name);
  CHECK(test::all_blocks_free(*e));
}

}  // namespace

TEST_MAIN({
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return check::skip("no GPU visible");
  const std::string models = check::repo_root + "/test/fixtures/models";
  check_model(models + "/tiny-llama", "tiny-llama");
  check_model(models + "/tiny-gemma", "tiny-gemma (embed_scale)");
  check_model(models + "/tiny-gpt2", "tiny-gpt2 (learned positions)");
})
