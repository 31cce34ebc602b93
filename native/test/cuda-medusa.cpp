// Medusa on the GPU (issue 28): token trees through the CUDA attention (both kernels: head_dim 128 on tensor cores,
// 256 on the SIMT kernel) against the CPU model with the very same dummy weights, alone and beside a decode row,
// after a long context (a split one) and a short one; each tree row against the causal chunk of its own path; the
// top-k kernel against a host sort, ties and a vocabulary smaller than k included; the heads' guesses against the
// CPU heads; and the executor with heads on the GPU giving its plain greedy output, as a tree and as a chain.
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
  // Two sequences in disjoint halves of the pool, their blocks out of order.
  for (int i = 0; i < 64; ++i) t0[i] = (i * 37 + 5) % 64, t1[i] = 64 + (i * 29 + 3) % 64;
  auto both = [&](const std::vector<SequenceChunk>& chunks, ForwardOutput& og, ForwardOutput& oc) {
    gpu->forward(chunks, og);
    cpu->forward(chunks, oc);
  };
  // Each row's own L2 error against the CPU's (a row whose mask is off by one key among hundreds would hide in an
  // error taken over all rows together).
  auto compare = [&](const std::vector<SequenceChunk>& chunks, const std::string& what) {
    ForwardOutput og, oc;
    both(chunks, og, oc);
    const bool same = og.logits.size() == oc.logits.size() && !oc.logits.empty();
    double e = same ? 0 : 1;
    for (size_t r = 0; same && r < oc.logits.size() / V; ++r)
      e = std::max(e, rel_err(og.logits.data() + r * V, oc.logits.data() + r * V, V));
    std::printf("%s/%s: logits rel err vs CPU, worst row %.3g (%zu rows)\n", label.c_str(), what.c_str(), e,
                oc.logits.size() / V);
    CHECK_MSG(e < kTol, "%s/%s: rel err %g", label.c_str(), what.c_str(), e);
    return og;
  };
  compare({{tokens(700, 1, V), 0, t0, false}, {tokens(40, 2, V), 0, t1, false}}, "prefill");
  // A tree of 14 candidates after `past` positions: branches at several depths, a deep chain, a lone leaf. After 700
  // positions it spans several tiles and a split context at batch 1; after 9 each key weighs enough that a tree row
  // seeing one position too many or too few shows.
  for (const int past : {700, 9}) {
    const std::string at = "after " + std::to_string(past);
    if (past != 700) compare({{tokens(past, 5, V), 0, t0, false}}, "prefill " + std::to_string(past));
    SequenceChunk tree{tokens(14, 3, V), past, t0, true};
    tree.tree_parents = {-1, 0, 1, 2, 3, 0, 5, 1, 7, 2, 0, 10, 11, 12};
    const ForwardOutput alone = compare({tree}, "tree " + at);
    // Beside a decode row of the other sequence (one launch, rows of both).
    compare({tree, SequenceChunk{{7}, 40, t1, false}}, "tree+decode " + at);
    // Each node's row against the last row of the causal chunk of its path (the path's tokens at consecutive
    // positions, written to the slots the tree's first tokens had) on the CPU; that chunk on the GPU too.
    double tree_vs_path = 0, gpu_path = 0, gpu_vs_gpu = 0;
    for (int node : {4, 6, 9, 13}) {
      std::vector<int32_t> path;
      for (int n = node; n >= 0; n = tree.tree_parents[static_cast<size_t>(n)]) path.insert(path.begin(), tree.tokens[n]);
      ForwardOutput og, oc;
      both({SequenceChunk{path, past, t0, false}}, og, oc);
      const float* row = alone.logits.data() + static_cast<size_t>(node) * V;
      tree_vs_path = std::max(tree_vs_path, rel_err(row, oc.logits.data(), V));
      gpu_path = std::max(gpu_path, rel_err(og.logits.data(), oc.logits.data(), V));
      gpu_vs_gpu = std::max(gpu_vs_gpu, rel_err(row, og.logits.data(), V));
    }
    std::printf("%s %s: tree rows vs their paths as causal chunks on the CPU: rel err %.3g (the paths on the GPU "
                "%.3g; tree rows vs the GPU's paths %.3g)\n", label.c_str(), at.c_str(), tree_vs_path, gpu_path,
                gpu_vs_gpu);
    CHECK_MSG(tree_vs_path < kTol, "%s %s: tree rows differ from their paths: %g", label.c_str(), at.c_str(),
              tree_vs_path);
    CHECK_MSG(gpu_path < kTol, "%s %s: the paths on the GPU differ from the CPU's: %g", label.c_str(), at.c_str(),
              gpu_path);
  }

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

// The executor with heads on the GPU: every greedy output equals the plain one, checked as trees and as the chain,
// but where the two leave each other at a close call: a check pass runs several rows through other kernels than a
// decode step does, so on random weights (near ties) bf16 may tip a step either way. Such a step is judged on the
// CPU model (fp32): the two tokens' logits there lie within twice the GPU's largest logit error on that context.
// Random heads guess badly, so most checks reject most of a tree: what they hold is that a rejected branch leaves
// nothing behind (the node after the kept ones is drawn from the model's own row, and its KV slots are rewritten);
// trained heads keep some, and the steps they save are printed (tokens a check pass).
void executor_checks(const std::string& dir, const std::function<std::shared_ptr<MedusaHeads>()>& make_heads) {
  // (also the judge of close calls below, with a GPU model of its own: both with fresh KV for each context)
  auto cpu = load_model(dir, cudatest::options(Device::cpu));
  const int32_t V = cpu->config().vocab_size;
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
  // The context's last row on both models: the CPU's logits of tokens a and b, the GPU's error.
  auto gpu = load_model(dir, cudatest::options(Device::cuda));
  cpu->allocate_kv(16, 16);
  gpu->allocate_kv(16, 16);
  std::vector<int32_t> blocks(16);
  std::iota(blocks.begin(), blocks.end(), 0);
  auto close_call = [&](const std::vector<int32_t>& ctx, int32_t a, int32_t b, double& margin, double& err) {
    ForwardOutput oc, og;
    cpu->forward({SequenceChunk{ctx, 0, blocks, false}}, oc);
    gpu->forward({SequenceChunk{ctx, 0, blocks, false}}, og);
    margin = std::fabs(static_cast<double>(oc.logits[static_cast<size_t>(a)]) - oc.logits[static_cast<size_t>(b)]);
    err = cudatest::max_abs_err(og.logits.data(), oc.logits.data(), static_cast<size_t>(V));
    return margin <= 2 * err;
  };
  for (bool tree : {true, false}) {
    const auto [got, drafted, accepted, passes] = run(true, tree);
    int equal = 0, close = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      if (got[i] == plain[i]) {
        ++equal;
        continue;
      }
      size_t at = 0;
      while (at < got[i].size() && at < plain[i].size() && got[i][at] == plain[i][at]) ++at;
      const bool ended = at == got[i].size() || at == plain[i].size();  // one stopped early: never a close call
      std::vector<int32_t> ctx = tokens(5 + 3 * static_cast<int>(i), 10 + static_cast<int>(i), V);
      ctx.insert(ctx.end(), plain[i].begin(), plain[i].begin() + static_cast<std::ptrdiff_t>(at));
      double margin = 0, err = 0;
      const bool ok = !ended && close_call(ctx, plain[i][at], got[i][at], margin, err);
      std::printf("  request %zu leaves the plain output at token %zu (%d for %d): CPU logits %.4g apart, GPU error "
                  "%.4g: %s\n", i, at, ended ? -1 : got[i][at], ended ? -1 : plain[i][at], margin, err,
                  ok ? "a close call" : "CLEAR");
      close += ok ? 1 : 0;
      CHECK_MSG(ok, "%s: Medusa %s output %zu differs from the plain one at a clear margin", dir.c_str(),
                tree ? "tree" : "chain", i);
    }
    std::printf("executor (%s): Medusa %s on the GPU: %d of %zu greedy outputs equal to the plain ones, %d leave them "
                "at a close call; %lld guesses checked in %lld passes, %lld kept (%.2f tokens a pass)\n", dir.c_str(),
                tree ? "trees of 12" : "chain of 3", equal, plain.size(), close, static_cast<long long>(drafted),
                static_cast<long long>(passes), static_cast<long long>(accepted),
                passes > 0 ? 1.0 + static_cast<double>(accepted) / passes : 0.0);
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
