// Medusa heads (medusa/): read from the published layout (the fixture made by scripts/fixtures/make_medusa_heads.py,
// and broken copies of it), their top-10 guesses against a float64 computation of the same heads; token trees in the
// CPU model (each node's logits are its path's as an ordinary chunk); the choices (default list, checks, the tree a
// step feeds); and speculation by the heads through the executor: outputs equal the plain executor's token for
// token — greedy and seeded sampled, streaming, stop words, max_tokens — as a chain of first choices and as trees
// of 4 to 40 candidates (kept branches off the first choices computed again the next step); with heads that guess
// exactly the token the model drew last, the chain keeps exactly the repeats of the plain output (a guess read from
// any other row would break that count). Refusals: another drafter at once, heads of another shape.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

#include "check.h"
#include "executor-test-util.h"
#include "medusa-test-util.h"
#include "loading/safetensors.h"
#include "medusa/medusa-checkpoint.h"
#include "medusa/medusa-tree.h"
#include "model/model.h"
#include "temp-dir.h"
#include "wrapped-model.h"

using namespace engine;

namespace {

std::string model_dir() { return check::repo_root + "/test/fixtures/models/tiny-llama"; }
std::string heads_dir() { return check::repo_root + "/test/fixtures/medusa/tiny-llama-heads"; }

std::unique_ptr<Model> tiny_llama() {
  LoadOptions o;
  o.num_threads = 1;
  return load_model(model_dir(), o);
}

// Head k's logits for hidden row x, in float64.
std::vector<double> reference_logits(const MedusaHead& head, const std::vector<float>& x0, int32_t H, int32_t V) {
  std::vector<double> x(x0.begin(), x0.end());
  for (const MedusaHead::Block& b : head.blocks) {
    std::vector<double> t(static_cast<size_t>(H));
    for (int32_t o = 0; o < H; ++o) {
      double s = b.b[static_cast<size_t>(o)];
      for (int32_t i = 0; i < H; ++i) s += double(b.w[static_cast<size_t>(o * H + i)]) * x[static_cast<size_t>(i)];
      t[static_cast<size_t>(o)] = s;
    }
    for (int32_t o = 0; o < H; ++o) x[static_cast<size_t>(o)] += t[static_cast<size_t>(o)] / (1 + std::exp(-t[static_cast<size_t>(o)]));
  }
  std::vector<double> logits(static_cast<size_t>(V));
  for (int32_t v = 0; v < V; ++v) {
    double s = 0;
    for (int32_t i = 0; i < H; ++i) s += double(head.out[static_cast<size_t>(v * H + i)]) * x[static_cast<size_t>(i)];
    logits[static_cast<size_t>(v)] = s;
  }
  return logits;
}

// A model that records the chunks of every forward() and passes everything on to the CPU model.
class Recording : public test::WrappedModel {
 public:
  explicit Recording(std::unique_ptr<Model> inner) : WrappedModel(std::move(inner)) {}
  bool supports_token_trees() const override { return trees_ && inner_->supports_token_trees(); }
  int32_t medusa_heads() const override { return inner_->medusa_heads(); }
  void set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) override { inner_->set_medusa_heads(std::move(heads)); }
  void head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) override {
    head_rows += static_cast<int>(rows.size());
    inner_->head_guesses(rows, out);
  }
  // device_: as a model that samples on its device (the CUDA decoder): a chunk whose SampleOn is not host gets its
  // argmax rows back as tokens, without a logits row (greedy only here).
  bool samples_on_device() const override { return device_; }
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override {
    count(chunks);
    if (!device_) {
      inner_->forward(chunks, out);
      return;
    }
    std::vector<SequenceChunk> host = chunks;
    for (SequenceChunk& c : host) c.sample_on = SampleOn::host;
    ForwardOutput all;
    inner_->forward(host, all);
    run_sampling_prep();
    const auto V = static_cast<size_t>(all.vocab_size);
    out.vocab_size = all.vocab_size;
    out.logits.clear();
    out.first_row.assign(chunks.size(), -1);
    out.sampled.assign(chunks.size(), DeviceSample{});
    out.first_sample.assign(chunks.size(), -1);
    out.row_samples.clear();
    for (size_t i = 0; i < chunks.size(); ++i) {
      const SequenceChunk& c = chunks[i];
      const size_t rows = c.all_logits ? c.tokens.size() : 1;
      const float* first = all.logits.data() + static_cast<size_t>(all.first_row[i]) * V;
      if (c.sample_on == SampleOn::host) {
        out.first_row[i] = static_cast<int32_t>(out.logits.size() / V);
        out.logits.insert(out.logits.end(), first, first + rows * V);
        continue;
      }
      if (c.sample_on != SampleOn::device_argmax && !c.device_sampling.greedy)
        throw std::logic_error("Recording: only greedy device rows are emulated");
      auto argmax = [&](const float* row) {
        const auto best = static_cast<int32_t>(std::max_element(row, row + V) - row);
        double z = 0;
        for (size_t t = 0; t < V; ++t) z += std::exp(static_cast<double>(row[t]) - row[best]);
        return DeviceSample{best, static_cast<float>(-std::log(z))};
      };
      if (c.all_logits) {
        out.first_sample[i] = static_cast<int32_t>(out.row_samples.size());
        for (size_t r = 0; r < rows; ++r) out.row_samples.push_back(argmax(first + r * V));
        out.sampled[i] = out.row_samples.back();
      } else {
        out.sampled[i] = argmax(first + (rows - 1) * V);
      }
    }
  }
  void count(const std::vector<SequenceChunk>& chunks) {
    for (const SequenceChunk& c : chunks) {
      tree_chunks += c.tree_parents.empty() ? 0 : 1;
      // A kept branch's tokens computed again before the next guesses: the chunk's first token has a single child
      // (every tree these tests feed branches at its root), or, with no guesses that step, several tokens fed
      // without a row each.
      const bool under_fed = !c.tree_parents.empty() && std::count(c.tree_parents.begin(), c.tree_parents.end(), 0) == 1;
      catch_up_chunks += under_fed || (!c.all_logits && c.tokens.size() > 1 && c.past_len > 0) ? 1 : 0;
    }
  }
  bool trees_ = true;
  bool device_ = false;
  int tree_chunks = 0, catch_up_chunks = 0;  // (catch-ups: a kept branch off the first choices computed again)
  int head_rows = 0;                          // rows the heads ran on
};

// A copy of the fixture with config.json replaced and its tensors passed through `edit`.
std::string broken_copy(const std::string& config_json,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit = nullptr) {
  return test::edited_copy(heads_dir(), "medusa_lm_head.safetensors", config_json, edit);
}

ExecutorConfig config(int32_t tokens = 4) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.draft_model_tokens = tokens;
  return c;
}

struct Run {
  std::vector<test::Outcome> outcomes;
  int64_t drafted = 0, accepted = 0;
  int tree_chunks = 0, catch_up_chunks = 0, head_rows = 0;
};

// Each request alone (so the iteration stats are one request's), with the heads given (none: plain decoding).
// choices: ExecutorConfig::medusa_choices; trees false: a model without token trees (each head's first choice).
Run run(std::shared_ptr<const MedusaHeads> heads, const std::vector<Request>& requests, int32_t tokens = 4,
        const MedusaChoices& choices = {}, bool trees = true, bool device = false) {
  auto model = std::make_unique<Recording>(tiny_llama());
  Recording* recording = model.get();
  model->trees_ = trees;
  model->device_ = device;
  if (heads) model->set_medusa_heads(heads);
  ExecutorConfig c = config(tokens);
  c.iter_stats_max_iterations = 100000;
  c.medusa_choices = choices;
  Executor e(std::move(model), c);
  Run r;
  for (const Request& req : requests) {
    const RequestId id = e.enqueue(req);
    std::map<RequestId, test::Outcome> out;
    while (!out[id].is_final)
      for (auto& resp : e.await_responses(std::chrono::milliseconds(100))) test::Harness::absorb(out, std::move(resp));
    r.outcomes.push_back(out[id]);
    CHECK_MSG(!out[id].has_error, "%s", out[id].error_message.c_str());
  }
  for (const auto& s : e.get_latest_iteration_stats()) {
    r.drafted += s.spec_decoding_stats.num_draft_tokens;
    r.accepted += s.spec_decoding_stats.num_accepted_tokens;
  }
  CHECK(e.kv_cache_stats().free_num_blocks == e.kv_cache_stats().max_num_blocks);
  r.tree_chunks = recording->tree_chunks;
  r.catch_up_chunks = recording->catch_up_chunks;
  r.head_rows = recording->head_rows;
  return r;
}

std::vector<Request> greedy_requests(int32_t max_tokens) {
  std::vector<Request> out;
  for (int32_t salt = 1; salt <= 4; ++salt) {
    out.push_back(test::make_request(test::prompt_of(5 + 3 * salt, salt, 512), max_tokens, /*streaming=*/salt % 2 == 0));
    out.back().output.exclude_input_from_output = true;  // (streamed outputs never hold the prompt)
  }
  return out;
}

// Heads that guess exactly what the model's LM head picks from the row they read: no blocks' effect (zero
// weights), the model's own (tied) LM head as each head's projection.
std::shared_ptr<const MedusaHeads> echo_heads(int32_t num_heads) { return test::lm_head_medusa_heads(model_dir(), num_heads); }

// The guesses echo heads get kept, read off the plain output: after each drawn token x, `room` guesses of x are
// checked, and kept while the tokens that follow are x again.
int64_t echo_kept(const std::vector<int32_t>& out, int32_t max_tokens, int32_t per_step) {
  int64_t kept = 0;
  int32_t n = 1;  // tokens out so far (the prompt's pass draws the first, without guesses)
  while (n < static_cast<int32_t>(out.size())) {
    const int32_t room = std::min(per_step, max_tokens - n - 1);
    const int32_t last = out[static_cast<size_t>(n - 1)];
    int32_t a = 0;
    while (a < room && out[static_cast<size_t>(n + a)] == last) ++a;
    kept += a;
    n += a + 1;
  }
  return kept;
}

}  // namespace

// Each node of a token tree fed in one pass gets the logits its path fed as an ordinary chunk gets.
void tree_pass_equals_paths() {
  std::unique_ptr<Model> m = tiny_llama();
  CHECK(m->supports_token_trees());
  m->allocate_kv(16, 4);
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4, 5};
  SequenceChunk prompt;
  prompt.tokens = test::prompt_of(9, 4, 512);
  prompt.block_ids = blocks;
  ForwardOutput out;
  m->forward({prompt}, out);
  //        0
  //      / | \ .
  //     1  4  6
  //    / \  \ .
  //   2   3  5
  SequenceChunk tree;
  tree.past_len = 9;
  tree.block_ids = blocks;
  tree.tokens = {17, 300, 42, 7, 300, 99, 11};
  tree.tree_parents = {-1, 0, 1, 1, 0, 4, 0};
  tree.all_logits = true;
  // Each token's logits in a pass over `chunk` against its path (root to it) fed as an ordinary chunk.
  auto expect_paths = [&](const SequenceChunk& chunk, const char* what) {
    ForwardOutput whole;
    m->forward({chunk}, whole);
    const size_t V = 512;
    for (size_t node = 0; node < chunk.tokens.size(); ++node) {
      SequenceChunk linear;
      linear.past_len = chunk.past_len;
      linear.block_ids = chunk.block_ids;
      for (int32_t n = static_cast<int32_t>(node); n >= 0; n = chunk.tree_parents[static_cast<size_t>(n)])
        linear.tokens.insert(linear.tokens.begin(), chunk.tokens[static_cast<size_t>(n)]);
      ForwardOutput lo;
      m->forward({linear}, lo);
      double worst = 0;
      for (size_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(double(whole.logits[node * V + v]) - lo.logits[v]));
      CHECK_MSG(worst < 1e-4, "%s, token %zu (depth %zu): logits differ from its path's by %g", what, node,
                linear.tokens.size() - 1, worst);
    }
  };
  expect_paths(tree, "tree");
  // Tokens fed before a tree (a kept branch computed again) are a chain the tree hangs from: each node's logits are
  // those of the chain followed by its path.
  SequenceChunk fed = tree;
  fed.tokens = {5, 6, 17, 300, 42, 7, 300, 99, 11};
  fed.tree_parents = {-1, 0, 1, 2, 3, 3, 2, 6, 2};
  expect_paths(fed, "fed chain + tree");
  // A malformed tree is the caller's bug, named.
  SequenceChunk bad = tree;
  bad.tree_parents[3] = 5;
  CHECK_THROWS(m->forward({bad}, out), "token tree parent 5 of token 3 is not an earlier token");
  // A model with sliding windows takes none.
  LoadOptions o;
  o.num_threads = 1;
  CHECK(!load_model(check::repo_root + "/test/fixtures/models/tiny-mistral-window", o)->supports_token_trees());
}

// The choices: the default list, the checks, and the tree a step feeds.
void choices_and_trees() {
  const MedusaChoices d = default_medusa_choices(3);
  CHECK(d.size() == 19);  // rank sums 0: 3 paths, 1: 6, 2: 10
  CHECK((d[0] == std::vector<int32_t>{0} && d[1] == std::vector<int32_t>{0, 0} && d[2] == std::vector<int32_t>{0, 0, 0} &&
         d[3] == std::vector<int32_t>{1} && d[4] == std::vector<int32_t>{0, 1}));
  CHECK(check_medusa_choices(d, 3).empty());
  CHECK(check_medusa_choices(d, 2) == "path [0, 0, 0] is 3 deep but there are 2 heads");
  CHECK(check_medusa_choices({{0}, {0, 10}}, 3) == "path [0, 10] has rank 10; ranks are in [0, 10)");
  CHECK(check_medusa_choices({{0, 1}, {0}}, 3) == "path [0, 1] comes before its parent [0]");
  CHECK(check_medusa_choices({{0}, {0}}, 3) == "path [0] is listed twice");
  CHECK(check_medusa_choices({{}}, 3) == "an empty path");
  // Heads' best tokens: head h's rank r is 100 * (h + 1) + r.
  std::vector<int32_t> top(static_cast<size_t>(3 * kMedusaTopK));
  for (int32_t h = 0; h < 3; ++h)
    for (int32_t r = 0; r < kMedusaTopK; ++r) top[static_cast<size_t>(h * kMedusaTopK + r)] = 100 * (h + 1) + r;
  // The first 5 default choices, depth-first with each node's children by rank: [0] [0,0] [0,0,0] [0,1] [1].
  const TokenTree t = build_token_tree(d, top.data(), 5, 3);
  CHECK((t.tokens == std::vector<int32_t>{100, 200, 300, 201, 101}));
  CHECK((t.parents == std::vector<int32_t>{0, 1, 2, 1, 0}));
  CHECK(!t.is_chain());
  // No deeper than the tokens left; a chain is a chain.
  const TokenTree shallow = build_token_tree(d, top.data(), 5, 1);
  CHECK((shallow.tokens == std::vector<int32_t>{100, 101, 102}) && !shallow.is_chain());
  const TokenTree chain = build_token_tree(d, top.data(), 3, 3);
  CHECK((chain.tokens == std::vector<int32_t>{100, 200, 300}) && chain.is_chain());
}

TEST_MAIN({
  tree_pass_equals_paths();
  choices_and_trees();
  const ModelConfig mc = load_model_config(model_dir());
  // The fixture in the published layout: 3 heads of one block, F16.
  const MedusaHeads fixture = load_medusa_heads(heads_dir(), mc);
  CHECK(fixture.num_heads() == 3 && fixture.num_layers == 1 && fixture.hidden == 64 && fixture.vocab == 512);
  CHECK(fixture.heads[2].blocks.size() == 1 && fixture.heads[2].out.size() == 512u * 64u);
  // Guesses against float64 for random hidden rows.
  {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t rows = 6;
    std::vector<float> xn(static_cast<size_t>(rows * 64));
    for (float& v : xn) v = normal(rng);
    std::vector<int32_t> got(static_cast<size_t>(rows * 3 * kMedusaTopK));
    std::vector<float> scratch;
    medusa_guesses(fixture, xn.data(), rows, got.data(), scratch);
    int same = 0, ordered = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int32_t k = 0; k < 3; ++k) {
        const std::vector<float> x(xn.begin() + r * 64, xn.begin() + (r + 1) * 64);
        const std::vector<double> ref = reference_logits(fixture.heads[static_cast<size_t>(k)], x, 64, 512);
        const int32_t* top = got.data() + (r * 3 + k) * kMedusaTopK;
        same += top[0] == static_cast<int32_t>(std::max_element(ref.begin(), ref.end()) - ref.begin());
        // The list is the best kMedusaTopK, best first (float32 against float64: within 1e-4).
        double tenth = ref[static_cast<size_t>(top[kMedusaTopK - 1])];
        int32_t better_outside = 0;
        for (int32_t v = 0; v < 512; ++v)
          if (std::find(top, top + kMedusaTopK, v) == top + kMedusaTopK && ref[static_cast<size_t>(v)] > tenth + 1e-4) ++better_outside;
        bool desc = better_outside == 0;
        for (int32_t j = 1; j < kMedusaTopK; ++j) desc = desc && ref[static_cast<size_t>(top[j])] <= ref[static_cast<size_t>(top[j - 1])] + 1e-4;
        ordered += desc ? 1 : 0;
      }
    CHECK_MSG(same == rows * 3, "%d of %lld first guesses equal float64's", same, static_cast<long long>(rows * 3));
    CHECK_MSG(ordered == rows * 3, "%d of %lld top-%d lists are float64's, best first", ordered, static_cast<long long>(rows * 3), kMedusaTopK);
  }
  // Refusals, each naming what is wrong.
  {
    const std::string cfg = "{\"medusa_num_heads\": 3, \"medusa_num_layers\": 1}";
    CHECK_THROWS(load_medusa_heads("/nonexistent/heads", mc), "/nonexistent/heads is not a directory");
    const std::string pt = test::make_temp_dir("medusa-pt");
    std::ofstream(pt + "/config.json") << cfg;
    std::ofstream(pt + "/medusa_lm_head.pt") << "pickle";
    CHECK_THROWS(load_medusa_heads(pt, mc), "has only medusa_lm_head.pt, a pickle");
    CHECK_THROWS(load_medusa_heads(broken_copy("{\"medusa_num_layers\": 1}"), mc), "has no 'medusa_num_heads'");
    CHECK_THROWS(load_medusa_heads(broken_copy("{\"medusa_num_heads\": 0}"), mc), "medusa_num_heads must be in [1, 64], got 0");
    CHECK_THROWS(load_medusa_heads(broken_copy("[3]"), mc), "must hold a JSON object");
    // More heads than the file has: the first missing one is named.
    CHECK_THROWS(load_medusa_heads(broken_copy("{\"medusa_num_heads\": 4}"), mc), "has no tensor '3.0.linear.weight'");
    // Two blocks a head where the file has one: block 1's weight is missing.
    CHECK_THROWS(load_medusa_heads(broken_copy("{\"medusa_num_heads\": 1, \"medusa_num_layers\": 2}"), mc),
                 "has no tensor '0.1.linear.weight'");
    // Fewer heads than the file has: the first ones are taken, as Medusa's own loader does.
    CHECK(load_medusa_heads(broken_copy("{\"medusa_num_heads\": 2}"), mc).num_heads() == 2);
    // A prefixed layout reads the same.
    const MedusaHeads prefixed = load_medusa_heads(broken_copy(cfg, [](std::vector<TensorToWrite>& ts) {
      for (TensorToWrite& t : ts) t.name = "medusa_head." + t.name;
    }), mc);
    CHECK(prefixed.num_heads() == 3 && prefixed.heads[1].out == fixture.heads[1].out);
    CHECK_THROWS(load_medusa_heads(broken_copy(cfg, [](std::vector<TensorToWrite>& ts) {
      for (TensorToWrite& t : ts)
        if (t.name == "1.1.weight") t.shape = {256, 128}, t.bytes.resize(256 * 128 * 2);
    }), mc), "tensor '1.1.weight' is [256, 128] but a head's vocabulary projection of a model with hidden_size 64 and vocab_size 512 is [512, 64]");
    // Heads made for another model: the model refuses them.
    auto other = std::make_shared<MedusaHeads>(fixture);
    other->vocab = 1000;
    CHECK_THROWS(tiny_llama()->set_medusa_heads(other), "are for hidden_size 64 and vocab_size 1000, the model has 64 and 512");
    // One drafter at a time.
    std::unique_ptr<Model> m = tiny_llama();
    m->set_medusa_heads(std::make_shared<MedusaHeads>(fixture));
    ExecutorConfig c = config();
    c.ngram_speculation.max_draft_tokens = 2;
    CHECK_THROWS(Executor(std::move(m), c), "one drafter guesses at a time");
  }
  const auto heads = std::make_shared<const MedusaHeads>(fixture);
  // Greedy: the plain tokens, with guesses checked, some kept (the fixture's heads start from the LM head) — as a
  // chain of first choices on a model without trees, and as trees of 4, 12 and 40 candidates (the default choices,
  // and a wide list of 40: every rank below 10 at depth 1, then under the first two). Trees keep branches off the
  // first choices too, whose tokens the next step computes again.
  MedusaChoices wide;
  for (int32_t r = 0; r < 10; ++r) wide.push_back({r});
  for (int32_t a = 0; a < 2; ++a)
    for (int32_t r = 0; r < 10; ++r) wide.push_back({a, r});
  for (int32_t a = 0; a < 2; ++a)
    for (int32_t r = 0; r < 5; ++r) wide.push_back({a, 0, r});
  int tree_chunks = 0, catch_ups = 0;
  for (int32_t max_tokens : {1, 2, 24}) {
    const auto requests = greedy_requests(max_tokens);
    const Run plain = run(nullptr, requests);
    CHECK(plain.drafted == 0 && plain.catch_up_chunks == 0);
    struct Way {
      const char* name;
      int32_t per_step;
      MedusaChoices choices;
      bool trees;
    };
    for (const Way& way : {Way{"chain, 1 a step", 1, {}, false}, Way{"chain, 4 a step", 4, {}, false},
                           Way{"tree of 4", 4, {}, true}, Way{"tree of 12", 12, {}, true}, Way{"tree of 40", 40, wide, true}}) {
      const Run spec = run(heads, requests, way.per_step, way.choices, way.trees);
      for (size_t i = 0; i < requests.size(); ++i)
        CHECK_MSG(spec.outcomes[i].tokens == plain.outcomes[i].tokens && spec.outcomes[i].reason == plain.outcomes[i].reason,
                  "max_tokens %d, %s, request %zu", max_tokens, way.name, i);
      if (max_tokens == 24)
        CHECK_MSG(spec.drafted > 0 && spec.accepted > 0 && spec.accepted <= spec.drafted, "%s: %lld guessed, %lld kept",
                  way.name, static_cast<long long>(spec.drafted), static_cast<long long>(spec.accepted));
      if (max_tokens <= 2) CHECK(spec.drafted == 0);  // no room: the last token is never fed back
      if (!way.trees) CHECK(spec.tree_chunks == 0 && spec.catch_up_chunks == 0);
      tree_chunks += spec.tree_chunks;
      catch_ups += spec.catch_up_chunks;
    }
  }
  CHECK_MSG(tree_chunks > 0 && catch_ups > 0, "%d tree steps, %d steps computing a kept branch again", tree_chunks, catch_ups);
  // On a model that samples on its device (the CUDA decoder: no host logits rows), the heads read the logit rows of
  // device-drawn chunks: the plain output, and the very guesses kept on the host.
  {
    const auto requests = greedy_requests(24);
    const Run plain = run(nullptr, requests);
    for (bool trees : {true, false}) {
      const Run host = run(heads, requests, 12, {}, trees);
      const Run device = run(heads, requests, 12, {}, trees, true);
      for (size_t i = 0; i < requests.size(); ++i)
        CHECK_MSG(device.outcomes[i].tokens == plain.outcomes[i].tokens, "device rows, trees %d, request %zu", trees, i);
      CHECK_MSG(device.drafted == host.drafted && device.accepted == host.accepted && device.accepted > 0,
                "trees %d: device rows %lld guessed, %lld kept; host rows %lld, %lld", trees,
                static_cast<long long>(device.drafted), static_cast<long long>(device.accepted),
                static_cast<long long>(host.drafted), static_cast<long long>(host.accepted));
      CHECK(device.head_rows == host.head_rows);
    }
  }
  // Requests that will not speculate (num_draft_tokens 0, a guide) cost no head rows; the others one a step.
  {
    std::vector<Request> requests = greedy_requests(12);
    const Run plain = run(nullptr, requests);
    for (Request& r : requests) r.num_draft_tokens = 0;
    const Run off = run(heads, requests);
    CHECK(off.head_rows == 0 && off.drafted == 0);
    for (size_t i = 0; i < requests.size(); ++i) CHECK(off.outcomes[i].tokens == plain.outcomes[i].tokens);
    const Run on = run(heads, greedy_requests(12));
    CHECK_MSG(on.head_rows > 0 && on.head_rows <= 4 * 12, "%d head rows for 4 requests of 12 tokens", on.head_rows);
  }
  // Echo heads: the guesses kept are the plain output's repeats, exactly.
  {
    const int32_t max_tokens = 40;
    const auto requests = greedy_requests(max_tokens);
    const Run plain = run(nullptr, requests);
    for (int32_t num_heads : {1, 3}) {
      // (each head's first choice: what echo heads guess is the token drawn last)
      MedusaChoices chain;
      for (int32_t d = 1; d <= num_heads; ++d) chain.emplace_back(static_cast<size_t>(d), 0);
      const Run spec = run(echo_heads(num_heads), requests, 4, chain);
      int64_t want = 0;
      for (size_t i = 0; i < requests.size(); ++i) {
        CHECK(spec.outcomes[i].tokens == plain.outcomes[i].tokens);
        want += echo_kept(plain.outcomes[i].tokens, max_tokens, num_heads);
      }
      CHECK_MSG(want > 0, "the prompts' outputs repeat no token: the test checks nothing kept");
      CHECK_MSG(spec.accepted == want, "%d echo heads: %lld guesses kept, the plain output's repeats say %lld", num_heads,
                static_cast<long long>(spec.accepted), static_cast<long long>(want));
    }
  }
  // Stop words and seeded sampling: the plain tokens too.
  {
    std::vector<Request> requests = greedy_requests(30);
    const Run plain0 = run(nullptr, requests);
    const std::vector<int32_t>& o = plain0.outcomes[0].tokens;
    requests[0].stop_words = {{o[10], o[11]}};
    for (size_t i = 1; i < requests.size(); ++i) {
      requests[i].sampling.temperature = 0.8f;
      requests[i].sampling.top_k = 20;
      requests[i].sampling.seed = 100 + i;
    }
    const Run plain = run(nullptr, requests);
    CHECK(plain.outcomes[0].tokens.size() <= 12);
    for (int32_t per_step : {3, 12}) {
      const Run spec = run(heads, requests, per_step);
      for (size_t i = 0; i < requests.size(); ++i)
        CHECK_MSG(spec.outcomes[i].tokens == plain.outcomes[i].tokens, "%d a step, request %zu (%s)", per_step, i,
                  i == 0 ? "stop words" : "sampled");
    }
  }
})
