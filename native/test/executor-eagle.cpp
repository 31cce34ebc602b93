// EAGLE heads (eagle/): read from the published EAGLE-1 and EAGLE-3 layouts (the fixtures made by scripts/fixtures/
// make_eagle_heads.py, and broken copies of them); the draft's chains of guesses at every decode step equal the
// fixture's float64 numpy computation of the same heads on the same model (what shows the draft computes EAGLE's
// function: fc over [embedding; feature], no input norm on layer 0, no final norm, the model's LM head; EAGLE-3's:
// fc over the residual streams entering the model's layers 0, 1 and after 1, [input_layernorm(embedding);
// hidden_norm(h)] into q/k/v with h the residual, its own final norm and LM head over 256 ids mapped by d2t, a guess
// fed back before the final norm; the same chains under vLLM's layers.0. names); through the executor,
// a greedy request makes and keeps exactly the guesses the numpy run of the same checks made and kept (which shows
// the executor feeds the draft the model's features of the right positions, and drops those of refused guesses);
// outputs equal the plain executor's token for token — greedy and seeded sampled, streaming, stop words, end_id,
// max_tokens, prompts over several passes, pauses, a cached prefix, a batch of speculating and plain requests, a
// cancel mid-draft — for both fixtures. Trees of guesses (eagle_choices): a chain given as a tree makes and keeps
// the reference's guesses; a chain, a wide and a deep-and-wide tree give the plain outputs in the same ways (and
// every max_tokens from 1 to 12, stop words and end_id at several places, fewer nodes than paths); every checked
// tree's guesses are, by a draft run by hand over each branch alone, its branch's best at ranks the choices list;
// kept paths run longer than one guess and off the first choices. Bad eagle_choices are refused, naming the path.
// Refusals: heads of another shape, a missing tensor, an architecture not
// read, a pickle-only directory, a model that cannot keep its hidden states, another drafter at once; EAGLE-3 heads
// whose fc is not over the listed layers, whose aux layer ids (or the default's) do not fit the model, whose draft
// vocabulary exceeds the model's, whose d2t has another length or maps outside the vocabulary, with more than one
// layer, another target_hidden_size, q/k/v not over [embedding; hidden], a missing tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "check.h"
#include "executor-test-util.h"
#include "eagle/eagle-checkpoint.h"
#include "loading/json.h"
#include "loading/safetensors.h"
#include "medusa-test-util.h"
#include "medusa/medusa-tree.h"
#include "model/model.h"
#include "temp-dir.h"
#include "wrapped-model.h"

using namespace engine;

namespace {

std::string model_dir() { return check::repo_root + "/test/fixtures/models/tiny-llama"; }
std::string heads_dir() { return check::repo_root + "/test/fixtures/eagle/tiny-llama-heads"; }
std::string eagle3_dir() { return check::repo_root + "/test/fixtures/eagle/tiny-llama-eagle3-heads"; }

std::unique_ptr<Model> tiny_llama() {
  LoadOptions o;
  o.num_threads = 1;
  return load_model(model_dir(), o);
}

std::unique_ptr<Model> heads(const std::string& dir) {
  return load_eagle_heads(dir, model_dir(), load_model_config(model_dir()), 1);
}

std::vector<int32_t> ints(const json::Value& v) {
  std::vector<int32_t> out;
  for (const json::Value& x : v.as_array()) out.push_back(static_cast<int32_t>(x.as_int64()));
  return out;
}

struct Chain {
  int32_t tokens = 0;  // the guesses follow the prompt and the output's first tokens - prompt
  std::vector<int32_t> guesses;
};

struct Case {
  std::string name;
  std::vector<int32_t> prompt, output;
  std::vector<Chain> chains;  // one a decode step
  int64_t drafted = 0, accepted = 0;
};

struct Reference {
  int32_t draft_tokens = 0, max_tokens = 0;
  std::vector<Case> cases;
};

Reference reference(const std::string& dir) {
  const json::Value doc = json::parse_file(dir + "/reference.json");
  Reference r;
  r.draft_tokens = static_cast<int32_t>(doc.find("num_draft_tokens")->as_int64());
  r.max_tokens = static_cast<int32_t>(doc.find("max_tokens")->as_int64());
  for (const json::Value& c : doc.find("cases")->as_array()) {
    Case k;
    k.name = c.find("name")->as_string();
    k.prompt = ints(*c.find("input_ids"));
    for (const json::Value& g : c.find("chains")->as_array())
      k.chains.push_back({static_cast<int32_t>(g.find("tokens")->as_int64()), ints(*g.find("guesses"))});
    k.output = ints(*c.find("output_ids"));
    k.drafted = c.find("draft_tokens")->as_int64();
    k.accepted = c.find("accepted_tokens")->as_int64();
    r.cases.push_back(k);
  }
  return r;
}

int32_t argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// The model's features (final hidden states, or EAGLE-3's layers) of every position of `tokens` but the last (whose
// token the draft drew) — the draft's input, `*width` values a position; `*rows`: the positions m gave features of.
std::vector<float> features_before_last(Model& m, const std::vector<int32_t>& tokens, const std::vector<int32_t>& blocks,
                                        size_t feature_layers, int64_t* width, int64_t* rows) {
  SequenceChunk c;
  c.tokens.assign(tokens.begin(), tokens.end() - 1);
  c.block_ids = blocks;
  c.all_logits = true;
  ForwardOutput fo;
  m.forward({c}, fo);
  const float* hidden = m.final_hidden(*rows);
  *width = m.config().hidden_size * std::max<int64_t>(1, static_cast<int64_t>(feature_layers));
  return std::vector<float>(hidden, hidden + *rows * *width);
}

// The draft's n guesses after `tokens`, driven by hand through the Model interface: the model's features of every
// position but the last, then the draft over slots 0..P-2 (token i + 1 beside feature i), then each guess fed back
// with the draft's own output.
std::vector<int32_t> guesses_by_hand(const std::vector<int32_t>& tokens, int32_t n, const std::string& dir) {
  std::unique_ptr<Model> d = heads(dir);
  CHECK(d->takes_features());
  const std::vector<int32_t> layers = d->feature_layers();
  std::unique_ptr<Model> m = tiny_llama();
  m->keep_final_hidden(layers);
  m->allocate_kv(32, 4);
  std::vector<int32_t> blocks(32);
  for (int32_t i = 0; i < 32; ++i) blocks[static_cast<size_t>(i)] = i;
  int64_t width = 0, rows = 0;
  std::vector<float> features = features_before_last(*m, tokens, blocks, layers.size(), &width, &rows);
  CHECK(rows == static_cast<int64_t>(tokens.size()) - 1);
  const int32_t V = m->config().vocab_size;
  const int64_t H = m->config().hidden_size;

  d->allocate_kv(32, 4);
  ForwardOutput fo;
  SequenceChunk s;
  s.tokens.assign(tokens.begin() + 1, tokens.end());
  s.block_ids = blocks;
  std::vector<int32_t> out;
  for (int32_t j = 0; j < n; ++j) {
    d->set_input_features(features.data(), width);
    d->forward({s}, fo);
    out.push_back(argmax(fo.logits.data(), V));
    const float* h = d->final_hidden(rows);
    CHECK(rows == 1);
    features.assign(h, h + H);
    width = H;
    s.past_len += static_cast<int32_t>(s.tokens.size());
    s.tokens = {out.back()};
  }
  return out;
}

ExecutorConfig config(int32_t tokens = 4) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.draft_model_tokens = tokens;
  c.iter_stats_max_iterations = 100000;
  return c;
}

struct Run {
  std::vector<test::Outcome> outcomes;
  int64_t drafted = 0, accepted = 0;
  int64_t most_accepted = 0;  // the most guesses one iteration kept (one request alone: its longest kept path)
};

// A token tree the model checked: the chunk's tokens and parents (SequenceChunk::tree_parents) at past_len.
struct SeenTree {
  std::vector<int32_t> tokens, parents;
  int32_t past_len = 0;
};

// The model, recording the token trees it is asked to check; everything else passes through.
class TreeWatch : public test::WrappedModel {
 public:
  TreeWatch(std::unique_ptr<Model> inner, std::vector<SeenTree>* seen) : WrappedModel(std::move(inner)), seen_(seen) {}
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override {
    for (const SequenceChunk& c : chunks)
      if (!c.tree_parents.empty()) seen_->push_back({c.tokens, c.tree_parents, c.past_len});
    inner_->forward(chunks, out);
  }
  bool supports_token_trees() const override { return inner_->supports_token_trees(); }
  void keep_final_hidden(const std::vector<int32_t>& aux_layers) override { inner_->keep_final_hidden(aux_layers); }
  const float* final_hidden(int64_t& rows) const override { return inner_->final_hidden(rows); }

 private:
  std::vector<SeenTree>* seen_;
};

std::vector<SeenTree>* watched = nullptr;  // set: run() records the trees checked here

// The requests enqueued together (or each alone, so the stats are one request's), with the EAGLE heads in `eagle`
// or without (empty); `before` may act on the executor once they are in (a cancel).
Run run(const std::string& eagle, const std::vector<Request>& requests, const ExecutorConfig& c = config(),
        bool alone = false, const std::function<void(Executor&, const std::vector<RequestId>&)>& before = nullptr) {
  std::unique_ptr<Model> target = tiny_llama();
  if (watched) target = std::make_unique<TreeWatch>(std::move(target), watched);
  Executor e(std::move(target), c, eagle.empty() ? nullptr : heads(eagle));
  Run r;
  auto wait = [&](const std::vector<RequestId>& ids) {
    std::map<RequestId, test::Outcome> out;
    auto done = [&] {
      for (RequestId id : ids)
        if (!out[id].is_final) return false;
      return true;
    };
    while (!done())
      for (auto& resp : e.await_responses(std::chrono::milliseconds(100))) test::Harness::absorb(out, std::move(resp));
    for (RequestId id : ids) r.outcomes.push_back(out[id]);
  };
  if (alone) {
    for (const Request& req : requests) wait({e.enqueue(req)});
  } else {
    std::vector<RequestId> ids;
    for (const Request& req : requests) ids.push_back(e.enqueue(req));
    if (before) before(e, ids);
    wait(ids);
  }
  for (const auto& s : e.get_latest_iteration_stats()) {
    r.drafted += s.spec_decoding_stats.num_draft_tokens;
    r.accepted += s.spec_decoding_stats.num_accepted_tokens;
    r.most_accepted = std::max(r.most_accepted, s.spec_decoding_stats.num_accepted_tokens);
  }
  CHECK(test::all_blocks_free(e));
  return r;
}

bool same_outputs(const Run& a, const Run& b) {
  if (a.outcomes.size() != b.outcomes.size()) return false;
  for (size_t i = 0; i < a.outcomes.size(); ++i) {
    const test::Outcome &x = a.outcomes[i], &y = b.outcomes[i];
    if (x.tokens != y.tokens || x.reason != y.reason || x.has_error || y.has_error) {
      std::fprintf(stderr, "request %zu differs (errors: '%s' / '%s')\n", i, x.error_message.c_str(), y.error_message.c_str());
      return false;
    }
  }
  return true;
}

// A prompt of several KV blocks (tokens_per_block 4): a repeat of it finds most of it cached.
std::vector<int32_t> ref_prompt_long() { return test::prompt_of(21, 5, 512); }

std::vector<Request> mixed_requests(int32_t max_tokens) {
  std::vector<Request> out;
  const Reference ref = reference(heads_dir());
  for (const Case& k : ref.cases) out.push_back(test::make_request(k.prompt, max_tokens));
  for (int32_t salt = 1; salt <= 3; ++salt) {
    out.push_back(test::make_request(test::prompt_of(5 + 7 * salt, salt, 512), max_tokens, /*streaming=*/salt != 2));
    out.back().output.exclude_input_from_output = true;  // (streamed outputs never hold the prompt)
  }
  return out;
}

// A cancel mid-draft (the executor held with guesses in the draft's pool) frees both pools' blocks; the other
// requests go on to the plain outputs.
void cancel_mid_draft(const std::string& dir, const ExecutorConfig& c) {
  std::vector<Request> rs = mixed_requests(40);
  rs[0].streaming = true;
  rs[0].output.exclude_input_from_output = true;
  const Run plain = run("", rs);
  const Run spec = run(dir, rs, c, false, [](Executor& e, const std::vector<RequestId>& ids) {
    e.hold_iterations(3);
    CHECK(e.wait_until_held(test::kWait));
    CHECK(e.draft_kv_cache_stats().used_num_blocks > 0);
    e.cancel(ids[0]);
    e.hold_iterations(-1);
  });
  CHECK(spec.outcomes[0].reason == FinishReason::cancelled);
  for (size_t i = 1; i < rs.size(); ++i) CHECK_MSG(spec.outcomes[i].tokens == plain.outcomes[i].tokens, "request %zu", i);
}

// mixed_requests with every other request sampled (seeded) and every third not speculating (num_draft_tokens 0).
std::vector<Request> sampled_and_plain_requests(int32_t max_tokens) {
  std::vector<Request> rs = mixed_requests(max_tokens);
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i % 2 == 0) {
      rs[i].sampling.temperature = 0.9f;
      rs[i].sampling.top_p = 0.95f;
      rs[i].sampling.seed = 11 + i;
    }
    if (i % 3 == 0) rs[i].num_draft_tokens = 0;
  }
  return rs;
}

// The model as a backend that cannot keep its final hidden states (Model's default: the CUDA decoder's).
class KeepsNoHidden : public test::WrappedModel {
 public:
  using WrappedModel::WrappedModel;
};

// A copy of the fixture in `dir` with config.json replaced (empty: kept) and its tensors passed through `edit`.
std::string broken_copy(const std::string& config_json,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit = nullptr,
                        const std::string& dir = heads_dir()) {
  return test::edited_copy(dir, "model.safetensors", config_json, edit);
}

std::string fixture_config_with(const std::string& from, const std::string& to, const std::string& dir = heads_dir()) {
  std::ifstream in(dir + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  CHECK_MSG(at != std::string::npos, "the fixture's config.json has no '%s'", from.c_str());
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// What both fixtures' heads are checked for: the guess chains against the numpy reference, by hand and through the
// executor, and outputs equal to the plain executor's in every way a request can go.
void check_heads(const std::string& dir) {
  const Reference ref = reference(dir);
  CHECK(ref.cases.size() >= 2 && ref.draft_tokens == 4);
  // The draft's guesses equal the float64 reference's at every decode step of its runs.
  for (const Case& k : ref.cases) {
    CHECK(!k.chains.empty());
    for (const Chain& chain : k.chains) {
      std::vector<int32_t> tokens = k.prompt;
      tokens.insert(tokens.end(), k.output.begin(), k.output.begin() + (chain.tokens - static_cast<int32_t>(k.prompt.size())));
      const std::vector<int32_t> g = guesses_by_hand(tokens, static_cast<int32_t>(chain.guesses.size()), dir);
      CHECK_MSG(g == chain.guesses, "%s after %d tokens: the draft's guesses differ from the numpy reference's",
                k.name.c_str(), chain.tokens);
    }
  }
  // Through the executor: the reference's output, its guesses made and kept.
  for (const Case& k : ref.cases) {
    Request r = test::make_request(k.prompt, ref.max_tokens);
    r.output.exclude_input_from_output = true;
    const Run spec = run(dir, {r}, config(ref.draft_tokens), /*alone=*/true);
    CHECK_MSG(spec.outcomes[0].tokens == k.output, "%s: output differs from the reference", k.name.c_str());
    CHECK_MSG(spec.drafted == k.drafted && spec.accepted == k.accepted,
              "%s: %lld guesses made, %lld kept; the reference made %lld and kept %lld", k.name.c_str(),
              static_cast<long long>(spec.drafted), static_cast<long long>(spec.accepted),
              static_cast<long long>(k.drafted), static_cast<long long>(k.accepted));
  }
  // Plain and speculating outputs are the same: greedy (streaming and not), any max_tokens, any guess count.
  for (int32_t max_tokens : {1, 2, 7, 30}) {
    const Run plain = run("", mixed_requests(max_tokens));
    for (int32_t k : {1, 4}) {
      const Run spec = run(dir, mixed_requests(max_tokens), config(k));
      CHECK_MSG(same_outputs(plain, spec), "max_tokens %d, %d guesses a step", max_tokens, k);
      if (max_tokens == 30) CHECK(spec.drafted > 0 && spec.accepted > 0);
    }
  }
  // Seeded sampled requests draw the plain tokens; a batch mixing speculating and plain (num_draft_tokens 0).
  {
    const std::vector<Request> rs = sampled_and_plain_requests(20);
    CHECK(same_outputs(run("", rs), run(dir, rs)));
  }
  // end_id and stop words end the output where the plain executor does, also when a guess ran past them.
  {
    std::vector<Request> rs;
    for (const Case& k : ref.cases) {
      Request a = test::make_request(k.prompt, 30);
      a.end_id = k.output[5];
      rs.push_back(a);
      Request b = test::make_request(k.prompt, 30, /*streaming=*/true);
      b.stop_words = {{k.output[8], k.output[9]}};
      b.output.exclude_input_from_output = true;
      rs.push_back(b);
    }
    const Run plain = run("", rs), spec = run(dir, rs);
    CHECK(same_outputs(plain, spec));
    CHECK(spec.outcomes[0].reason == FinishReason::end_id && spec.outcomes[1].reason == FinishReason::stop_words);
  }
  // Prompts over several passes (chunked context; the draft catches up over several), pauses under a small pool,
  // a cached prefix (no features for it: the draft starts after it, Sequence::draft_base; still the plain output).
  {
    ExecutorConfig chunked = config(3);
    chunked.max_num_tokens = 8;
    chunked.enable_chunked_context = true;
    ExecutorConfig plain_chunked = chunked;
    CHECK(same_outputs(run("", mixed_requests(16), plain_chunked), run(dir, mixed_requests(16), chunked)));
    for (auto policy : {CapacitySchedulerPolicy::guaranteed_no_evict, CapacitySchedulerPolicy::max_utilization}) {
      ExecutorConfig small = config(4);
      small.policy = policy;
      small.max_tokens_in_paged_kv_cache = 96;
      CHECK_MSG(same_outputs(run("", mixed_requests(24), small), run(dir, mixed_requests(24), small)), "policy %d",
                static_cast<int>(policy));
    }
    ExecutorConfig reuse = config(4);
    reuse.enable_kv_cache_reuse = true;
    std::vector<Request> twice = mixed_requests(12);
    twice.push_back(twice[2]);
    CHECK(same_outputs(run("", twice, reuse, /*alone=*/true), run(dir, twice, reuse, /*alone=*/true)));
    // The repeat starts on the first one's cached blocks and still gets guesses.
    const Request again = test::make_request(ref_prompt_long(), 12);
    const Run once = run(dir, {again}, reuse, true), repeated = run(dir, {again, again}, reuse, true);
    const Run plain_repeated = run("", {again, again}, reuse, true);
    CHECK(same_outputs(plain_repeated, repeated));
    CHECK_MSG(repeated.drafted > once.drafted && once.drafted > 0,
              "a request on a cached prefix drafts too: %lld guesses for one, %lld for two",
              static_cast<long long>(once.drafted), static_cast<long long>(repeated.drafted));
  }
  cancel_mid_draft(dir, config());
}

// A row's kMedusaTopK best ids, likeliest first (the lower id on ties).
std::vector<int32_t> top_ids(const float* row, int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(kMedusaTopK);
  return ids;
}

// The draft's best guesses after `tokens` and then `path`, driven by hand as guesses_by_hand does: the model's
// features of the sequence, then the draft causally over it and the path alone (each path token beside the draft's
// own output before it), so nothing of another branch can be in its context.
std::vector<int32_t> top_after_by_hand(Model& m, Model& d, const std::vector<int32_t>& tokens,
                                       const std::vector<int32_t>& path) {
  std::vector<int32_t> blocks(64);
  for (int32_t i = 0; i < 64; ++i) blocks[static_cast<size_t>(i)] = i;
  int64_t width = 0, rows = 0;
  std::vector<float> features = features_before_last(m, tokens, blocks, d.feature_layers().size(), &width, &rows);
  const int64_t H = m.config().hidden_size;
  ForwardOutput fo;
  SequenceChunk s;
  s.tokens.assign(tokens.begin() + 1, tokens.end());
  s.block_ids = blocks;
  for (size_t j = 0;; ++j) {
    d.set_input_features(features.data(), width);
    d.forward({s}, fo);
    if (j == path.size()) return top_ids(fo.logits.data(), fo.vocab_size);
    const float* h = d.final_hidden(rows);
    features.assign(h, h + H);
    width = H;
    s.past_len += static_cast<int32_t>(s.tokens.size());
    s.tokens = {path[j]};
  }
}

// Each checked tree of one request whose whole text is `sequence`: every guess is, among the draft's best guesses
// after its own branch alone (by hand), at a rank that makes its path of ranks one of `choices`. Only trees whose
// root is plain to see are checked: the first node with two children (choices with [0] and [1]; the tokens before it
// are a kept branch computed again). Returns how many trees were checked and, in `catch_ups`, how many followed such
// a kept branch.
int32_t check_seen_trees(const std::string& dir, const MedusaChoices& choices, const std::vector<SeenTree>& seen,
                         const std::vector<int32_t>& sequence, int32_t& catch_ups) {
  std::unique_ptr<Model> d = heads(dir);
  std::unique_ptr<Model> m = tiny_llama();
  m->keep_final_hidden(d->feature_layers());
  m->allocate_kv(64, 4);
  d->allocate_kv(64, 4);
  const std::set<std::vector<int32_t>> paths(choices.begin(), choices.end());
  int32_t checked = 0;
  for (const SeenTree& t : seen) {
    const auto n = static_cast<int32_t>(t.tokens.size());
    std::vector<int32_t> children(static_cast<size_t>(n), 0);
    for (int32_t i = 1; i < n; ++i) ++children[static_cast<size_t>(t.parents[static_cast<size_t>(i)])];
    int32_t root = 0;
    while (root < n && children[static_cast<size_t>(root)] < 2) ++root;
    if (root == n) continue;
    const int32_t at = t.past_len + root;  // the root's position
    CHECK(at < static_cast<int32_t>(sequence.size()));
    CHECK(std::equal(t.tokens.begin(), t.tokens.begin() + root + 1, sequence.begin() + t.past_len));
    const std::vector<int32_t> through_root(sequence.begin(), sequence.begin() + at + 1);
    std::vector<std::vector<int32_t>> path(static_cast<size_t>(n)), ranks(static_cast<size_t>(n));
    std::map<int32_t, std::vector<int32_t>> top;  // per parent: the draft's best guesses after its branch
    for (int32_t i = root + 1; i < n; ++i) {
      const auto p = static_cast<size_t>(t.parents[static_cast<size_t>(i)]);
      if (!top.count(static_cast<int32_t>(p))) top[static_cast<int32_t>(p)] = top_after_by_hand(*m, *d, through_root, path[p]);
      const std::vector<int32_t>& best = top[static_cast<int32_t>(p)];
      const auto rank = std::find(best.begin(), best.end(), t.tokens[static_cast<size_t>(i)]) - best.begin();
      CHECK_MSG(rank < kMedusaTopK, "guess %d at position %d is not among the draft's best after its branch",
                t.tokens[static_cast<size_t>(i)], at);
      path[static_cast<size_t>(i)] = path[p];
      path[static_cast<size_t>(i)].push_back(t.tokens[static_cast<size_t>(i)]);
      ranks[static_cast<size_t>(i)] = ranks[p];
      ranks[static_cast<size_t>(i)].push_back(static_cast<int32_t>(rank));
      CHECK_MSG(paths.count(ranks[static_cast<size_t>(i)]), "a guess at position %d has a path of ranks not chosen", at);
    }
    ++checked;
    if (root > 0) ++catch_ups;
  }
  return checked;
}

// A tree grown over passes, a depth a pass (SequenceChunk::tree_past, as the EAGLE draft grows its trees): each
// node's logits are those of its path fed as an ordinary chunk, though its earlier depths are in the K/V beside their
// siblings.
void tree_grown_over_passes_equals_paths() {
  std::unique_ptr<Model> m = tiny_llama();
  m->allocate_kv(16, 4);
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4, 5};
  SequenceChunk prompt;
  prompt.tokens = test::prompt_of(9, 4, 512);
  prompt.block_ids = blocks;
  ForwardOutput out;
  m->forward({prompt}, out);
  //        0          depth 0: slot 9
  //      / | \ .
  //     1  2  3       depth 1: slots 10-12
  //    / \  \ .
  //   4   5  6        depth 2: slots 13-15
  const std::vector<int32_t> tokens = {17, 300, 300, 11, 42, 7, 99}, parents = {-1, 0, 0, 0, 1, 1, 2};
  const std::vector<std::pair<int32_t, int32_t>> depths = {{0, 1}, {1, 4}, {4, 7}};  // nodes [from, to) of a pass
  const size_t V = 512;
  std::vector<float> grown(tokens.size() * V);
  for (const auto& [from, to] : depths) {
    SequenceChunk c;
    c.past_len = 9 + from;
    c.block_ids = blocks;
    c.tokens.assign(tokens.begin() + from, tokens.begin() + to);
    c.tree_past = from;
    c.tree_parents.assign(parents.begin(), parents.begin() + to);
    c.all_logits = true;
    m->forward({c}, out);
    std::copy(out.logits.begin(), out.logits.end(), grown.begin() + static_cast<std::ptrdiff_t>(from * V));
  }
  for (size_t node = 0; node < tokens.size(); ++node) {
    SequenceChunk linear;
    linear.past_len = 9;
    linear.block_ids = blocks;
    for (int32_t n = static_cast<int32_t>(node); n >= 0; n = parents[static_cast<size_t>(n)])
      linear.tokens.insert(linear.tokens.begin(), tokens[static_cast<size_t>(n)]);
    ForwardOutput lo;
    m->forward({linear}, lo);
    double worst = 0;
    for (size_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(double(grown[node * V + v]) - lo.logits[v]));
    CHECK_MSG(worst < 1e-4, "node %zu: logits differ from its path's by %g", node, worst);
  }
  // Nodes in the past are the tree's: no more of them than the past holds, and parents for all of them.
  SequenceChunk bad;
  bad.past_len = 2;
  bad.block_ids = blocks;
  bad.tokens = {5};
  bad.tree_past = 3;
  bad.tree_parents = {-1, 0, 0, 1};
  CHECK_THROWS(m->forward({bad}, out), "has tree_past 3 (past_len 2, 4 tree parents)");
  bad.past_len = 9;
  bad.tree_parents = {-1, 0};
  CHECK_THROWS(m->forward({bad}, out), "a token tree of 2 parents for 4 nodes");
}

// EAGLE trees (ExecutorConfig::eagle_choices) with the heads in `dir`: a chain as a tree makes and keeps the
// reference's guesses; every shape gives the plain outputs in every way a request can go; the trees checked hold
// each branch's own guesses, and kept paths run longer than one guess and off the first choices.
void check_trees(const std::string& dir) {
  const MedusaChoices chain = {{0}, {0, 0}, {0, 0, 0}, {0, 0, 0, 0}};
  const MedusaChoices wide = {{0}, {1}, {2}, {3}, {4}, {5}};
  const MedusaChoices deep_wide = {{0}, {1}, {0, 0}, {0, 1}, {1, 0}, {2}, {0, 0, 0}, {0, 0, 1}, {0, 1, 0},
                                   {1, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 0, 0, 0}};
  auto with = [](const MedusaChoices& choices, int32_t n) {
    ExecutorConfig c = config(n);
    c.eagle_choices = choices;
    return c;
  };
  const Reference ref = reference(dir);
  // The chain as a tree: the draft grows it a depth a pass, and makes and keeps the chain's guesses.
  for (const Case& k : ref.cases) {
    Request r = test::make_request(k.prompt, ref.max_tokens);
    r.output.exclude_input_from_output = true;
    const Run spec = run(dir, {r}, with(chain, 4), /*alone=*/true);
    CHECK_MSG(spec.outcomes[0].tokens == k.output, "%s, chain as a tree: output differs from the reference", k.name.c_str());
    CHECK_MSG(spec.drafted == k.drafted && spec.accepted == k.accepted,
              "%s, chain as a tree: %lld guesses made, %lld kept; the reference made %lld and kept %lld", k.name.c_str(),
              static_cast<long long>(spec.drafted), static_cast<long long>(spec.accepted),
              static_cast<long long>(k.drafted), static_cast<long long>(k.accepted));
  }
  for (const MedusaChoices* choices : {&chain, &wide, &deep_wide}) {
    const auto n = static_cast<int32_t>(choices->size());
    // Greedy, streaming or not, any max_tokens; fewer nodes than paths (num_draft_tokens 3: the first 3 paths).
    for (int32_t max_tokens : {1, 2, 7, 30}) {
      const Run plain = run("", mixed_requests(max_tokens));
      for (int32_t nodes : {n, 3}) {
        const Run spec = run(dir, mixed_requests(max_tokens), with(*choices, nodes));
        CHECK_MSG(same_outputs(plain, spec), "a tree of %d paths, %d nodes, max_tokens %d", n, nodes, max_tokens);
        if (max_tokens == 30) CHECK(spec.drafted > 0 && spec.accepted > 0);
      }
    }
    // max_tokens ending the output anywhere in a kept path: one request, every length.
    const Request one = test::make_request(ref.cases[0].prompt, 1);
    for (int32_t max_tokens = 1; max_tokens <= 12; ++max_tokens) {
      Request r = one;
      r.max_tokens = max_tokens;
      CHECK_MSG(same_outputs(run("", {r}), run(dir, {r}, with(*choices, n))), "max_tokens %d", max_tokens);
    }
    // Seeded sampled requests draw the plain tokens; a batch mixing tree-speculating and plain requests.
    const std::vector<Request> rs = sampled_and_plain_requests(20);
    CHECK(same_outputs(run("", rs), run(dir, rs, with(*choices, n))));
    // end_id and stop words end the output where the plain executor does, wherever they land in a kept path.
    std::vector<Request> stops;
    for (const Case& k : ref.cases)
      for (size_t at : {size_t{2}, size_t{5}, size_t{9}}) {
        Request a = test::make_request(k.prompt, 30);
        a.end_id = k.output[at];
        stops.push_back(a);
        Request b = test::make_request(k.prompt, 30, /*streaming=*/true);
        b.stop_words = {{k.output[at], k.output[at + 1]}};
        b.output.exclude_input_from_output = true;
        stops.push_back(b);
      }
    const Run plain_stops = run("", stops), spec_stops = run(dir, stops, with(*choices, n));
    CHECK(same_outputs(plain_stops, spec_stops));
    CHECK(spec_stops.outcomes[0].reason == FinishReason::end_id && spec_stops.outcomes[1].reason == FinishReason::stop_words);
    // Prompts over several passes, pauses under a small pool, a cached prefix.
    ExecutorConfig chunked = with(*choices, n);
    chunked.max_num_tokens = 8;
    chunked.enable_chunked_context = true;
    ExecutorConfig plain_chunked = config(4);
    plain_chunked.max_num_tokens = 8;
    plain_chunked.enable_chunked_context = true;
    CHECK(same_outputs(run("", mixed_requests(16), plain_chunked), run(dir, mixed_requests(16), chunked)));
    ExecutorConfig small = with(*choices, n);
    small.policy = CapacitySchedulerPolicy::max_utilization;
    small.max_tokens_in_paged_kv_cache = 96;
    ExecutorConfig plain_small = config(4);
    plain_small.policy = CapacitySchedulerPolicy::max_utilization;
    plain_small.max_tokens_in_paged_kv_cache = 96;
    CHECK(same_outputs(run("", mixed_requests(24), plain_small), run(dir, mixed_requests(24), small)));
    ExecutorConfig reuse = with(*choices, n), plain_reuse = config(4);
    reuse.enable_kv_cache_reuse = plain_reuse.enable_kv_cache_reuse = true;
    std::vector<Request> twice = mixed_requests(12);
    twice.push_back(twice[2]);
    CHECK(same_outputs(run("", twice, plain_reuse, /*alone=*/true), run(dir, twice, reuse, /*alone=*/true)));
    cancel_mid_draft(dir, with(*choices, n));
  }
  // The trees checked, against the draft run by hand over each branch alone; kept paths of more than one guess, and
  // off the first choices (the next step computes them again and drafts after them, from the model's rows).
  for (const MedusaChoices* choices : {&wide, &deep_wide}) {
    int32_t checked = 0, catch_ups = 0;
    int64_t most = 0;
    for (const Case& k : ref.cases) {
      std::vector<SeenTree> seen;
      watched = &seen;
      Request r = test::make_request(k.prompt, 30);
      const Run spec = run(dir, {r}, with(*choices, static_cast<int32_t>(choices->size())), /*alone=*/true);
      watched = nullptr;
      most = std::max(most, spec.most_accepted);
      checked += check_seen_trees(dir, *choices, seen, spec.outcomes[0].tokens, catch_ups);
    }
    CHECK_MSG(checked >= 4, "only %d trees checked", checked);
    CHECK_MSG(catch_ups > 0, "no tree followed a kept path off the first choices (%d trees)", checked);
    if (choices == &deep_wide) CHECK_MSG(most >= 2, "no step kept more than %lld guesses", static_cast<long long>(most));
  }
}

}  // namespace

TEST_MAIN({
  check_heads(heads_dir());
  check_heads(eagle3_dir());
  tree_grown_over_passes_equals_paths();
  check_trees(heads_dir());
  check_trees(eagle3_dir());
  // Bad eagle_choices: refused at construction, naming the option and the path; choices without EAGLE heads.
  {
    auto with = [](const MedusaChoices& choices) {
      ExecutorConfig c = config();
      c.eagle_choices = choices;
      return c;
    };
    CHECK_THROWS(Executor(tiny_llama(), with({{0, 1}}), heads(heads_dir())),
                 "eagle_choices: path [0, 1] comes before its parent [0]");
    CHECK_THROWS(Executor(tiny_llama(), with({{0}, {0, 10}}), heads(heads_dir())),
                 "eagle_choices: path [0, 10] has rank 10; ranks are in [0, 10)");
    CHECK_THROWS(Executor(tiny_llama(), with({{0}, {0}}), heads(heads_dir())), "eagle_choices: path [0] is listed twice");
    CHECK_THROWS(Executor(tiny_llama(), with({{0}, {}}), heads(heads_dir())), "eagle_choices: an empty path");
    CHECK_THROWS(Executor(tiny_llama(), with(MedusaChoices(64, std::vector<int32_t>{0})), heads(heads_dir())),
                 "eagle_choices: 64 paths; at most 63");
    CHECK_THROWS(Executor(tiny_llama(), with({{0}}), nullptr), "eagle_choices is set but there are no EAGLE heads");
    // Deeper than any Medusa head would go: EAGLE guesses as deep as a path goes.
    MedusaChoices deep;
    for (size_t d = 1; d <= 12; ++d) deep.push_back(std::vector<int32_t>(d, 0));
    CHECK(check_eagle_choices(deep).empty());
  }
  // Bad heads: each a load error naming the field or tensor and the values.
  {
    const std::string cfg = heads_dir() + "/config.json";
    CHECK_THROWS(heads(broken_copy(fixture_config_with("\"hidden_size\": 64", "\"hidden_size\": 32"))),
                 "hidden_size 32 but the model's is 64");
    CHECK_THROWS(heads(broken_copy("", [](std::vector<TensorToWrite>& ts) {
                   ts.erase(std::remove_if(ts.begin(), ts.end(), [](const TensorToWrite& t) { return t.name == "layers.0.mlp.down_proj.weight"; }),
                            ts.end());
                 })),
                 "layers.0.mlp.down_proj.weight");
    CHECK_THROWS(heads(broken_copy("", [](std::vector<TensorToWrite>& ts) {
                   for (TensorToWrite& t : ts)
                     if (t.name == "fc.weight") {
                       t.shape = {64, 64};
                       t.bytes.resize(64 * 64 * 2);
                     }
                 })),
                 "fc.weight");
    CHECK_THROWS(heads(broken_copy(fixture_config_with("LlamaForCausalLM", "MistralForCausalLM"))),
                 "architecture MistralForCausalLM is not read");
    CHECK_THROWS(heads(broken_copy(fixture_config_with("LlamaForCausalLM", "Eagle3Speculator"))),
                 "architecture Eagle3Speculator is not read; EAGLE-3 heads are read as LlamaForCausalLMEagle3");
    CHECK_THROWS(heads(broken_copy(fixture_config_with("\"vocab_size\": 512", "\"vocab_size\": 512, \"draft_vocab_size\": 256"))),
                 "draft_vocab_size is set (EAGLE-3) but the architecture is LlamaForCausalLM");
    const std::string pickle = test::make_temp_dir("eagle-pickle");
    std::filesystem::copy_file(cfg, pickle + "/config.json");
    std::ofstream(pickle + "/pytorch_model.bin") << "not read";
    CHECK_THROWS(heads(pickle), "has only pytorch_model.bin, a pickle, and pickles are not read; convert it once with");
    CHECK_THROWS(heads(check::repo_root + "/test/fixtures/no-such-heads"), "is not a directory");
  }
  // Bad EAGLE-3 heads: each a load error naming the field or tensor and the numbers.
  {
    const std::string e3 = eagle3_dir();
    auto with = [&](const std::string& from, const std::string& to) { return fixture_config_with(from, to, e3); };
    auto edited = [&](const std::function<void(std::vector<TensorToWrite>&)>& edit) { return broken_copy("", edit, e3); };
    auto tensor = [](std::vector<TensorToWrite>& ts, const std::string& name) -> TensorToWrite& {
      for (TensorToWrite& t : ts)
        if (t.name == name) return t;
      CHECK_MSG(false, "the fixture has no %s", name.c_str());
      return ts.front();
    };
    // fc over two layers' states where the config names three.
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   TensorToWrite& fc = tensor(ts, "fc.weight");
                   fc.shape = {64, 128};
                   fc.bytes.resize(64 * 128 * 2);
                 })),
                 "tensor 'fc.weight' has shape [64, 128], expected [64, 192]");
    // Layer ids name layer outputs (-1: the embeddings): tiny-llama's are -1..1.
    const std::string ids = "\"eagle_aux_hidden_state_layer_ids\": [\n      -1,\n      0,\n      1\n    ]";
    CHECK_THROWS(heads(broken_copy(with(ids, "\"eagle_aux_hidden_state_layer_ids\": [0, 1, 2]"), nullptr, e3)),
                 "eagle_config.eagle_aux_hidden_state_layer_ids is [0, 1, 2]: layer 2 is outside the model's -1..1 (id i: "
                 "the residual stream after layer i; -1: the embeddings)");
    CHECK_THROWS(heads(broken_copy(with(ids, "\"eagle_aux_hidden_state_layer_ids\": [-2, 0, 1]"), nullptr, e3)),
                 "layer -2 is outside the model's -1..1");
    // Without the ids: the default (2, L // 2, L - 3) does not fit a model of 2 layers.
    CHECK_THROWS(heads(broken_copy(with("\"eagle_aux_hidden_state_layer_ids\"", "\"other_ids\""), nullptr, e3)),
                 "no eagle_config.eagle_aux_hidden_state_layer_ids, and the default, the streams entering layers (2, L // "
                 "2, L - 3) of the model's 2, is [2, 1, -1]: layer -1 is outside 0..2");
    CHECK_THROWS(heads(broken_copy(with("\"draft_vocab_size\": 256", "\"draft_vocab_size\": 600"), nullptr, e3)),
                 "draft_vocab_size 600 must be 1..512 (the model's vocab_size)");
    CHECK_THROWS(heads(broken_copy(with("\"target_hidden_size\": 64", "\"target_hidden_size\": 4096"), nullptr, e3)),
                 "target_hidden_size 4096 but the model's hidden_size is 64");
    CHECK_THROWS(heads(broken_copy(with("\"num_hidden_layers\": 1", "\"num_hidden_layers\": 2"), nullptr, e3)),
                 "num_hidden_layers 2; EAGLE-3 heads of one layer are read");
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   TensorToWrite& d2t = tensor(ts, "d2t");
                   d2t.shape = {255};
                   d2t.bytes.resize(255 * 8);
                 })),
                 "d2t is I64 [255]; the heads' draft_vocab_size 256 needs I64 [256]");
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   const int64_t far = 1000;
                   std::memcpy(tensor(ts, "d2t").bytes.data() + 255 * 8, &far, 8);
                 })),
                 "d2t[255] = 1000 maps draft id 255 to 1255, outside the model's vocab_size 512");
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   ts.erase(std::remove_if(ts.begin(), ts.end(), [](const TensorToWrite& t) { return t.name == "midlayer.hidden_norm.weight"; }),
                            ts.end());
                 })),
                 "midlayer.hidden_norm.weight");
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   ts.erase(std::remove_if(ts.begin(), ts.end(), [](const TensorToWrite& t) { return t.name == "d2t"; }), ts.end());
                 })),
                 "d2t");
    CHECK_THROWS(heads(edited([&](std::vector<TensorToWrite>& ts) {
                   TensorToWrite& q = tensor(ts, "midlayer.self_attn.q_proj.weight");
                   q.shape = {64, 64};
                   q.bytes.resize(64 * 64 * 2);
                 })),
                 "tensor 'midlayer.self_attn.q_proj.weight' has shape [64, 64], expected [64, 128]");
    // The published layout under vLLM's names (layers.0. for midlayer.) reads the same heads.
    const std::string renamed = edited([](std::vector<TensorToWrite>& ts) {
      for (TensorToWrite& t : ts)
        if (t.name.rfind("midlayer.", 0) == 0) t.name = "layers.0." + t.name.substr(9);
    });
    const Reference ref3 = reference(e3);
    const Chain& chain = ref3.cases[0].chains[0];
    std::vector<int32_t> tokens = ref3.cases[0].prompt;
    tokens.insert(tokens.end(), ref3.cases[0].output.begin(),
                  ref3.cases[0].output.begin() + (chain.tokens - static_cast<int32_t>(tokens.size())));
    CHECK(guesses_by_hand(tokens, static_cast<int32_t>(chain.guesses.size()), renamed) == chain.guesses);
  }
  // Refusals: a model that keeps no hidden states (the CUDA backend's), EAGLE beside Medusa heads.
  {
    CHECK_THROWS(Executor(std::make_unique<KeepsNoHidden>(tiny_llama()), config(), heads(heads_dir())),
                 "EAGLE heads run on the CPU backend for now; on CUDA use --medusa-heads or --draft-model");
    std::unique_ptr<Model> m = tiny_llama();
    m->set_medusa_heads(test::lm_head_medusa_heads(model_dir(), 2));
    CHECK_THROWS(Executor(std::move(m), config(), heads(heads_dir())), "one drafter guesses at a time");
  }
})
