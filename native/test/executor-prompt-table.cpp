// P-tuning through the executor on the CPU model: a prompt whose virtual tokens take rows equal to real tokens'
// embeddings gives exactly what the prompt with those real tokens gives (logits bit for bit, the same greedy
// tokens), for a model without and with an embedding scale (Gemma); another table changes the output; prefix reuse
// never shares blocks between tables or between a tabled and an untabled request; bad tables and ids are refused
// at enqueue naming the input and the numbers; a model without prompt-table support refuses any table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "check.h"
#include "executor-test-util.h"
#include "model/model.h"
#include "prompt-table-test-util.h"

using namespace engine;

namespace {

std::unique_ptr<Executor> make_executor(const std::string& dir, bool reuse = false) {
  LoadOptions o;
  o.num_threads = 1;
  ExecutorConfig c;
  c.max_batch_size = 4;
  c.max_num_tokens = 256;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.enable_kv_cache_reuse = reuse;
  return std::make_unique<Executor>(load_model(dir, o), c);
}

// `context_logits`: asked for, the prompt is computed whole (no prefix reuse), so the reuse checks go without.
test::Outcome run(Executor& e, std::vector<int32_t> prompt, std::shared_ptr<const PromptTable> table,
                  bool context_logits = true) {
  Request r = test::make_request(std::move(prompt), 10);
  r.output.return_log_probs = true;
  r.output.return_context_logits = context_logits;
  r.prompt_table = std::move(table);
  const RequestId id = e.enqueue(r);
  return test::collect(e, {id}).at(id);
}

// The real tokens the table's rows copy, and a prompt using them through virtual ids (vocab + i) among real ones.
const std::vector<int32_t> kRowTokens = {17, 250, 3, 99};
std::vector<int32_t> virtual_prompt(int32_t vocab) { return {5, vocab + 0, 8, vocab + 2, vocab + 1, vocab + 3, 12, vocab + 0, 40}; }
std::vector<int32_t> real_prompt() { return {5, 17, 8, 3, 250, 99, 12, 17, 40}; }

void check_model(const std::string& dir, const char* name) {
  auto e = make_executor(dir);
  const int32_t vocab = e->model_config().vocab_size;
  auto rows = test::table_of_tokens(dir, kRowTokens);
  const test::Outcome want = run(*e, real_prompt(), nullptr);
  const test::Outcome got = run(*e, virtual_prompt(vocab), rows);
  CHECK_MSG(!got.has_error && !want.has_error, "%s: %s%s", name, got.error_message.c_str(), want.error_message.c_str());
  // Same ops on the same numbers: equality, not closeness.
  CHECK_MSG(got.last.result.context_logits == want.last.result.context_logits, "%s: context logits differ", name);
  CHECK_MSG(got.log_probs == want.log_probs, "%s: log probs differ", name);
  const size_t n = real_prompt().size();
  const std::vector<int32_t> got_gen(got.tokens.begin() + n, got.tokens.end()), want_gen(want.tokens.begin() + n, want.tokens.end());
  CHECK_MSG(got_gen == want_gen && !got_gen.empty(), "%s: greedy tokens differ", name);
  // The prompt comes back as sent (virtual ids included).
  CHECK_MSG(std::vector<int32_t>(got.tokens.begin(), got.tokens.begin() + n) == virtual_prompt(vocab), "%s: prompt echo", name);

  // Another table (random rows, the same ids) changes the logits from the first virtual position on, and the tokens.
  const int32_t hidden = e->model_config().hidden_size;
  const test::Outcome other = run(*e, virtual_prompt(vocab), test::random_table(4, hidden, 7, 2.0f));
  CHECK(!other.has_error);
  const auto& a = other.last.result.context_logits;
  const auto& b = want.last.result.context_logits;
  CHECK_MSG(std::equal(a.begin(), a.begin() + vocab, b.begin()), "%s: the row before any virtual token is the same", name);
  CHECK_MSG(!std::equal(a.begin() + vocab, a.begin() + 2 * vocab, b.begin() + vocab), "%s: another table changes the logits", name);
  CHECK_MSG(other.tokens != got.tokens, "%s: another table changes the greedy tokens", name);
  // A table whose ids the prompt does not use changes nothing.
  const test::Outcome unused = run(*e, real_prompt(), test::random_table(3, hidden, 9));
  CHECK_MSG(unused.last.result.context_logits == want.last.result.context_logits, "%s: an unused table", name);
  CHECK(test::all_blocks_free(*e));
  std::printf("%s: virtual tokens = their rows' real tokens, bit for bit\n", name);
}

// Prefix reuse: the same ids under table A, table B, A again; then a prompt of real ids with a table and without.
void check_prefix_reuse(const std::string& dir) {
  auto e = make_executor(dir, /*reuse=*/true);
  const int32_t vocab = e->model_config().vocab_size, hidden = e->model_config().hidden_size;
  auto table_a = test::table_of_tokens(dir, kRowTokens);
  auto table_b = test::random_table(4, hidden, 3, 2.0f);
  const test::Outcome b_alone = [&] {
    auto fresh = make_executor(dir);
    return run(*fresh, virtual_prompt(vocab), table_b, false);
  }();
  const test::Outcome a1 = run(*e, virtual_prompt(vocab), table_a, false);
  const int64_t reused0 = e->kv_cache_stats().reused_blocks;
  const test::Outcome b = run(*e, virtual_prompt(vocab), table_b, false);
  CHECK_MSG(e->kv_cache_stats().reused_blocks == reused0, "table B reused table A's blocks");
  CHECK_MSG(b.tokens == b_alone.tokens && b.log_probs == b_alone.log_probs, "table B after table A gives B's output");
  const test::Outcome a2 = run(*e, virtual_prompt(vocab), table_a, false);
  CHECK_MSG(e->kv_cache_stats().reused_blocks > reused0, "table A again reuses its own blocks");
  // (Its remaining tokens run in another batch shape than the whole prompt did: float sums may round apart.)
  double worst = a2.log_probs.size() == a1.log_probs.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a1.log_probs.size(), a2.log_probs.size()); ++i)
    worst = std::max(worst, std::fabs(double(a2.log_probs[i]) - a1.log_probs[i]));
  CHECK_MSG(a2.tokens == a1.tokens && worst < 1e-3, "table A on its reused blocks: log probs differ by %g", worst);
  // Real ids only: a tabled request and an untabled one still keep their blocks apart.
  run(*e, real_prompt(), table_a, false);
  const int64_t reused1 = e->kv_cache_stats().reused_blocks;
  run(*e, real_prompt(), nullptr, false);
  CHECK_MSG(e->kv_cache_stats().reused_blocks == reused1, "an untabled request reused a tabled one's blocks");
  run(*e, real_prompt(), nullptr, false);
  CHECK_MSG(e->kv_cache_stats().reused_blocks > reused1, "the untabled repeat reuses its own");
}

void check_refusals(const std::string& dir) {
  auto e = make_executor(dir);
  const int32_t vocab = e->model_config().vocab_size, hidden = e->model_config().hidden_size;
  auto enqueue = [&](std::vector<int32_t> prompt, std::shared_ptr<const PromptTable> table) {
    Request r = test::make_request(std::move(prompt), 4);
    r.prompt_table = std::move(table);
    e->enqueue(r);
  };
  const std::string v = std::to_string(vocab);
  CHECK_THROWS(enqueue({1, vocab + 4}, test::random_table(4, hidden, 1)),
               ("input_token_ids[1] = " + std::to_string(vocab + 4) + " is out of range [0, " + std::to_string(vocab + 4) +
                ") (vocab_size " + v + " + prompt_vocab_size 4)").c_str());
  CHECK_THROWS(enqueue({1, vocab}, nullptr), ("input_token_ids[1] = " + v + " is out of range [0, " + v + ")").c_str());
  CHECK_THROWS(enqueue({1, vocab}, test::random_table(2, hidden + 1, 1)),
               ("prompt_embedding_table rows have width " + std::to_string(hidden + 1) + " but must have the model's hidden_size " +
                std::to_string(hidden)).c_str());
  auto nan = std::make_shared<PromptTable>(*test::random_table(2, hidden, 1));
  nan->data[static_cast<size_t>(hidden) + 5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS(enqueue({1, vocab}, nan), "prompt_embedding_table[1][5] must be finite, got nan");
  auto short_data = std::make_shared<PromptTable>(*test::random_table(2, hidden, 1));
  short_data->rows = 3;
  CHECK_THROWS(enqueue({1, vocab}, short_data), ("holds " + std::to_string(2 * hidden) + " values, not prompt_vocab_size 3").c_str());
  CHECK(e->num_active_requests() == 0);
  // The executor goes on serving.
  CHECK(!run(*e, real_prompt(), nullptr).has_error);

  // A model without prompt-table support (the fake model) refuses any table by name.
  test::Harness h(test::small_config());
  Request r = test::make_request({1, 2}, 2);
  r.prompt_table = test::random_table(2, h.executor->model_config().hidden_size, 1);
  CHECK_THROWS(h.executor->enqueue(r), "prompt_embedding_table: this model does not embed virtual tokens (p-tuning)");
}

}  // namespace

TEST_MAIN({
  const std::string models = check::repo_root + "/test/fixtures/models";
  if (!check::exists(models + "/tiny-llama/model.safetensors")) return check::skip("no fixtures under %s", models.c_str());
  check_model(models + "/tiny-llama", "tiny-llama");
  check_model(models + "/tiny-gemma", "tiny-gemma (embed_scale)");
  check_model(models + "/tiny-gpt2", "tiny-gpt2 (learned positions)");
  check_prefix_reuse(models + "/tiny-llama");
  check_refusals(models + "/tiny-llama");
})
