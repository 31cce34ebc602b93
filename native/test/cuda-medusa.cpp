// Medusa on the GPU (issue 28): token trees through the CUDA attention (both kernels: head_dim 128 on tensor cores,
// 256 on the SIMT kernel) against the CPU model with the very same dummy weights, alone (a split context) and
// beside a decode row; a tree's rows against causal chunks of their own paths on the GPU itself; the top-k kernel
// against a host sort, ties and a vocabulary smaller than k included; the heads' guesses against the CPU heads;
// and the executor with heads on the GPU giving exactly its plain greedy output, as a tree and as a chain.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/device-buffer.h"
#include "cuda/medusa-kernels.h"
#include "medusa-test-util.h"

using namespace engine;
using cudatest::rel_err;

namespace {

constexpr double kTol = 1e-2;

const char* kLlamaHd128 = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "intermediate_size": 768,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 1000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "rope_theta": 500000.0})";
const char* kLlamaHd256 = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "intermediate_size": 768,
  "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 900,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": true, "rope_theta": 10000.0})";

uint64_t g_rng = 88172645463325252ull;
float uniform() {  // [-1, 1)
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<double>(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

std::vector<int32_t> tokens(int n, int salt, int32_t vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + salt * 104729) % vocab;
  return t;
}

// The top-k kernel against std::partial_sort with the same order (value, then the lower id).
void top_k_checks() {
  for (auto [vocab, k] : {std::pair<int64_t, int32_t>{1000, 10}, {50021, 10}, {128256, 16}, {777, 4}, {7, 10}}) {
    const int64_t rows = 5;
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (float& v : logits) v = std::round(uniform() * 200.0f) / 8.0f;  // coarse values: many ties
    cuda::DeviceBuffer dl(logits.size() * 4), dout(static_cast<size_t>(rows * k) * 4);
    cuda::check_cuda(cudaMemcpy(dl.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), "copy");
    cuda::medusa_top_k(dl.as<float>(), rows, vocab, vocab, k, dout.as<int32_t>(), nullptr);
    std::vector<int32_t> got(static_cast<size_t>(rows * k));
    cuda::check_cuda(cudaMemcpy(got.data(), dout.get(), got.size() * 4, cudaMemcpyDeviceToHost), "copy");
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      std::vector<int32_t> order(static_cast<size_t>(vocab));
      std::iota(order.begin(), order.end(), 0);
      const int64_t top = std::min<int64_t>(k, vocab);
      std::partial_sort(order.begin(), order.begin() + top, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (int32_t j = 0; j < k; ++j) bad += got[r * k + j] != (j < top ? order[j] : -1);
    }
    std::printf("top-k: vocab %lld, k %d: %d of %lld ids differ from the host sort\n", static_cast<long long>(vocab),
                k, bad, static_cast<long long>(rows * k));
    CHECK(bad == 0);
  }
}

void tree_and_heads_vs_cpu(const std::string& label, const char* config) {
  const std::string dir = cudatest::write_config(label, config);
  auto gpu = load_model(dir, cudatest::options(Device::cuda, "dummy"));
  auto cpu = load_model(dir, cudatest::options(Device::cpu, "dummy"));
  CHECK(gpu->supports_token_trees());
  const int32_t V = gpu->config().vocab_size, H = gpu->config().hidden_size, tpb = 16, nb = 128;
  gpu->allocate_kv(nb, tpb);
  cpu->allocate_kv(nb, tpb);
  std::vector<int32_t> t0(64), t1(64);
  for (int i = 0; i < 64; ++i) t0[i] = (i * 37 + 5) % nb, t1[i] = 64 + (i * 29 + 3) % 64;
  auto both = [&](const std::vector<SequenceChunk>& chunks, ForwardOutput& og, ForwardOutput& oc) {
    gpu->forward(chunks, og);
    cpu->forward(chunks, oc);
  };
  auto compare = [&](const std::vector<SequenceChunk>& chunks, const char* what) {
    ForwardOutput og, oc;
    both(chunks, og, oc);
    const bool same = og.logits.size() == oc.logits.size() && !oc.logits.empty();
    const double e = same ? rel_err(og.logits.data(), oc.logits.data(), oc.logits.size()) : 1;
    std::printf("%s/%s: logits rel err vs CPU %.3g (%zu rows)\n", label.c_str(), what, e, oc.logits.size() / V);
    CHECK_MSG(e < kTol, "%s/%s: rel err %g", label.c_str(), what, e);
    return og;
  };
  const int past = 700;  // several tiles, and a split context at batch 1
  compare({{tokens(past, 1, V), 0, t0, false}, {tokens(40, 2, V), 0, t1, false}}, "prefill");
  // A tree of 14 candidates after the 700 positions: branches at several depths, a deep chain, a lone leaf.
  SequenceChunk tree{tokens(14, 3, V), past, t0, true};
  tree.tree_parents = {-1, 0, 1, 2, 3, 0, 5, 1, 7, 2, 0, 10, 11, 12};
  const ForwardOutput alone = compare({tree}, "tree");
  // Beside a decode row of the other sequence (one launch, rows of both).
  compare({tree, SequenceChunk{{7}, 40, t1, false}}, "tree+decode");
  // Each node's row is the last row of the causal chunk of its path (on the GPU itself, the same slots written
  // as the tree's first tokens: the path's tokens at consecutive positions).
  double worst = 0;
  for (int node : {4, 6, 9, 13}) {
    std::vector<int32_t> path;
    for (int n = node; n >= 0; n = tree.tree_parents[static_cast<size_t>(n)]) path.insert(path.begin(), tree.tokens[n]);
    ForwardOutput o;
    gpu->forward({SequenceChunk{path, past, t0, false}}, o);
    worst = std::max(worst, rel_err(alone.logits.data() + static_cast<size_t>(node) * V, o.logits.data(), V));
  }
  std::printf("%s: tree rows vs their paths as causal chunks (GPU) rel err %.3g\n", label.c_str(), worst);
  CHECK_MSG(worst < kTol, "%s: tree rows differ from their paths: %g", label.c_str(), worst);

  // The heads on the rows of the last forward: the same guesses as the CPU heads but where bf16 moves a near tie.
  const auto heads = test::random_medusa_heads(H, V, 3);
  gpu->set_medusa_heads(heads);
  cpu->set_medusa_heads(heads);
  CHECK(gpu->medusa_heads() == 3);
  ForwardOutput og, oc;
  both({{tokens(30, 4, V), 0, t1, true}}, og, oc);
  const std::vector<int32_t> rows = {0, 7, 29, 13};
  std::vector<int32_t> gg, gc;
  gpu->head_guesses(rows, gg);
  cpu->head_guesses(rows, gc);
  CHECK(gg.size() == gc.size() && gg.size() == rows.size() * 3 * kMedusaTopK);
  int first = 0, overlap = 0;
  const int lists = static_cast<int>(rows.size()) * 3;
  for (int l = 0; l < lists; ++l) {
    first += gg[l * kMedusaTopK] == gc[l * kMedusaTopK];
    for (int j = 0; j < kMedusaTopK; ++j)
      overlap += std::count(gc.begin() + l * kMedusaTopK, gc.begin() + (l + 1) * kMedusaTopK, gg[l * kMedusaTopK + j]) > 0;
  }
  std::printf("%s: heads' first guess equal to the CPU's in %d of %d lists, %d of %d guesses in the CPU's lists\n",
              label.c_str(), first, lists, overlap, lists * kMedusaTopK);
  CHECK(first * 10 >= lists * 8);
  CHECK(overlap * 10 >= lists * kMedusaTopK * 8);
  std::vector<int32_t> none;
  CHECK_THROWS(gpu->head_guesses({30}, none), "not a logits row");
  // Heads for another shape are refused, naming both.
  CHECK_THROWS(gpu->set_medusa_heads(test::random_medusa_heads(H + 8, V, 1)), "hidden_size");
}

// The executor with heads on the GPU: every greedy output equals the plain one, checked as trees and as the chain.
// Random heads guess badly, so most checks reject most of a tree: what they hold is that a rejected branch leaves
// nothing behind (the node after the kept ones is drawn from the model's own row, and its KV slots are rewritten);
// trained heads keep some, and the steps they save are printed (tokens a check pass).
void executor_checks(const std::string& dir, const std::function<std::shared_ptr<MedusaHeads>()>& make_heads) {
  const int32_t V = load_model(dir, cudatest::options(Device::cpu))->config().vocab_size;
  auto run = [&](bool heads, bool tree) {
    auto model = load_model(dir, cudatest::options(Device::cuda));
    if (heads) model->set_medusa_heads(make_heads());
    ExecutorConfig c;
    c.tokens_per_block = 16;
    c.iter_stats_max_iterations = 100000;  // every iteration's speculation counts
    c.draft_model_tokens = tree ? 12 : 3;
    if (heads && !tree) c.medusa_choices = {{0}, {0, 0}, {0, 0, 0}};
    Executor ex(std::move(model), c);
    std::set<RequestId> ids;
    std::vector<RequestId> order;
    for (int i = 0; i < 6; ++i) {
      Request r;
      r.input_token_ids = tokens(5 + 3 * i, 10 + i, V);
      r.max_tokens = 48;
      r.sampling.temperature = 0;
      r.output.exclude_input_from_output = true;
      r.streaming = i % 2 == 1;
      const RequestId id = ex.enqueue(r);
      ids.insert(id);
      order.push_back(id);
    }
    auto out = cudatest::collect(ex, ids);
    std::vector<std::vector<int32_t>> got;
    for (RequestId id : order) got.push_back(out[id].tokens);
    int64_t drafted = 0, accepted = 0, passes = 0;
    for (const auto& s : ex.get_latest_iteration_stats()) {
      drafted += s.spec_decoding_stats.num_draft_tokens;
      accepted += s.spec_decoding_stats.num_accepted_tokens;
      passes += s.spec_decoding_stats.num_requests_with_draft_tokens;
    }
    CHECK(ex.kv_cache_stats().used_num_blocks == 0);
    return std::make_tuple(got, drafted, accepted, passes);
  };
  const auto [plain, d0, a0, p0] = run(false, false);
  for (bool tree : {true, false}) {
    const auto [got, drafted, accepted, passes] = run(true, tree);
    int equal = 0;
    for (size_t i = 0; i < plain.size(); ++i) equal += got[i] == plain[i];
    std::printf("executor (%s): Medusa %s on the GPU: %d of %zu greedy outputs equal to the plain ones; %lld guesses "
                "checked in %lld passes, %lld kept (%.2f tokens a pass)\n", dir.c_str(), tree ? "trees of 12" : "chain of 3",
                equal, plain.size(), static_cast<long long>(drafted), static_cast<long long>(passes),
                static_cast<long long>(accepted), passes > 0 ? 1.0 + static_cast<double>(accepted) / passes : 0.0);
    CHECK(equal == static_cast<int>(plain.size()));
    CHECK(drafted > 0);
  }
}

}  // namespace

TEST_MAIN({
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!cuda_backend_built() || cuda_device_count() == 0)
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  try {
    top_k_checks();
  } catch (const std::exception& e) {
    CHECK_MSG(false, "top-k: %s", e.what());
  }
  for (auto [label, cfg] : {std::pair{"medusa-hd128", kLlamaHd128}, {"medusa-hd256", kLlamaHd256}}) {
    try {
      tree_and_heads_vs_cpu(label, cfg);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", label, e.what());
    }
  }
  try {
    const std::string tiny = check::repo_root + "/test/fixtures/models/tiny-llama";
    const auto cfg = load_model(tiny, cudatest::options(Device::cpu))->config();
    executor_checks(tiny, [&] { return test::random_medusa_heads(cfg.hidden_size, cfg.vocab_size, 3); });
    const std::string brown = check::repo_root + "/examples/models/brown-llama-17m";
    // (the bundled model's trained blocks, each head projecting with its tied LM head, as the bench writes them)
    executor_checks(brown, [&] {
      return test::lm_head_medusa_heads(brown, 3, check::repo_root + "/bench/medusa/brown-llama-17m-heads.safetensors");
    });
  } catch (const std::exception& e) {
    CHECK_MSG(false, "executor: %s", e.what());
  }
})
