// Speed of the CUDA backend on one GPU, each figure next to its baseline measured in the same run:
//   copy   the device-to-device copy bandwidth (bytes read + written), the decode roofline's denominator;
//   decode forward() steps at several batch sizes after a prompt of --ctx tokens, median of --steps; at batch 1,
//          weight bytes / step time against the copy bandwidth (the memory-bound optimum), with the engine's
//          decode GEMV and with cuBLAS alone;
//   offline the executor over the model: --requests requests of --input / --output tokens (random ids, no end id),
//          all enqueued at once, output tokens per second.
//   verify (--verify 1,2,4,8) a speculative step's check: one chunk of 1 + K tokens per sequence with every row's
//          argmax taken on the device, at each of --batches, against the decode step of the same batch measured
//          above; with the tokens a step then yields at per-guess acceptance rates 0.5 / 0.7 /
//          0.9, the speedup a drafter that costs nothing (prompt lookup) would give can be read off.
// usage: cuda-bench <checkpoint dir> [--dummy] [--batches 1,8,64,256] [--ctx 128] [--steps 30] [--requests 1000]
//        [--input 128] [--output 128] [--max-batch 256] [--max-num-tokens 8192] [--dtype bfloat16] [--json out.json]
//        [--profile prefill|decode] [--sampled] [--quantization fp8] [--kv-cache-dtype fp8] [--verify 1,2,4,8]
//        [--ngram K] [--lora N,R]
// --lora N,R: N random adapters of rank R on q, k, v, o, gate, up and down of every layer (values scaled so the
// deltas stay a few percent of the projections' outputs), rows assigned to slots round-robin: each decode step is
// also timed with every row on an adapter, next to the base step of the same batch (three alternating pairs, the
// ratio of the medians' tokens per second), and the offline run is repeated with request i on adapter i % N (ExecutorConfig::lora); N = 0: none.
// --ngram K: the offline run with prompt-lookup speculation of up to K guesses (ExecutorConfig::ngram_speculation).
// --draft DIR (with --verify): a draft model's batch-1 decode step on the same GPU (dummy weights with --dummy), and
// a whole speculative step at batch 1 — K draft steps and the check — against the model's decode step.
// --medusa N (with --trees 4,8,16,32): N dummy Medusa heads (one residual block and a vocabulary projection each,
// as the Medusa checkpoints for Vicuna have) and a Medusa step at batch 1 — the check of a tree of T candidates in
// the shape default_medusa_choices gives, then the heads on one row — against the decode step, with the tokens a
// step must gain to pay for itself and the speedup at 2.0 / 2.5 / 3.0 tokens a step.
// --quantization fp8: the projections quantized to e4m3 per output channel at load (LoadOptions::quantization);
// the step table then also gives the bytes a decode step reads (all weights but an untied embedding table).
// --kv-cache-dtype fp8: K/V stored as e4m3 (LoadOptions::kv_cache_dtype); the offline run prints the tokens the pool
// holds either way (the executor sizes it from free memory, kv_cache_free_gpu_mem_fraction 0.9).
// --sampled: the offline requests sample (temperature 0.8, top-p 0.95, a seed each) instead of greedy.
// --profile brackets the first prefill chunk (32 sequences of --ctx tokens at most), the last decode step of each
// batch or the last verify step of each (batch, K) with cudaProfilerStart/Stop, for `ncu --profile-from-start off`
// (per-kernel times, no load or warm-up).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/cuda-decoder.h"
#include "cuda/kernels.h"
#include "executor/executor.h"
#include "medusa-test-util.h"
#include "medusa/medusa-tree.h"

using namespace engine;

namespace {

std::string g_profile;  // "", "prefill" or "decode"
struct ProfileRange {
  ProfileRange(const char* what, bool on) : on_(on && g_profile == what) {
    if (on_) cudaProfilerStart();
  }
  ~ProfileRange() {
    if (on_) {
      cudaDeviceSynchronize();
      cudaProfilerStop();
    }
  }
  bool on_;
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double copy_bandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemset(a, 1, bytes);
  cudaMemset(b, 0, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 2; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  float best_ms = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < 5; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best_ms = std::min(best_ms, ms / 5);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (best_ms / 1000.0);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoi(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

struct StepResult {
  int batch;
  double step_ms;
};

// Prefills `batch` sequences of `ctx` tokens, then times decode steps (greedy on the device, as the executor runs
// greedy requests). Block tables are disjoint slices of the pool. lora_slots > 0: sequence s runs LoRA slot
// s % lora_slots (prefill and decode).
double decode_step_ms(Model& m, int batch, int ctx, int steps, int tpb, int blocks_per_seq, int lora_slots = 0) {
  const int32_t V = m.config().vocab_size;
  std::vector<std::vector<int32_t>> tables(batch);
  for (int s = 0; s < batch; ++s)
    for (int b = 0; b < blocks_per_seq; ++b) tables[s].push_back(s * blocks_per_seq + b);
  ForwardOutput out;
  for (int s0 = 0; s0 < batch; s0 += 32) {
    std::vector<SequenceChunk> chunks;
    for (int s = s0; s < std::min(batch, s0 + 32); ++s) {
      std::vector<int32_t> t(ctx);
      for (int i = 0; i < ctx; ++i) t[i] = (i * 7919 + s * 131) % V;
      chunks.push_back({t, 0, tables[s], false});
      chunks.back().lora_slot = lora_slots > 0 ? s % lora_slots : -1;
    }
    ProfileRange range("prefill", s0 == 0);
    m.forward(chunks, out);
  }
  std::vector<double> times;
  for (int step = 0; step < steps + 3; ++step) {
    std::vector<SequenceChunk> chunks;
    for (int s = 0; s < batch; ++s) {
      SequenceChunk c{{(step * 17 + s) % V}, ctx + step, tables[s], false};
      c.sample_on = SampleOn::device_argmax;
      c.lora_slot = lora_slots > 0 ? s % lora_slots : -1;
      chunks.push_back(std::move(c));
    }
    ProfileRange range(lora_slots > 0 ? "decode-lora" : "decode", step == steps + 2);
    const double t0 = now();
    m.forward(chunks, out);
    if (step >= 3) times.push_back(now() - t0);  // the first steps warm caches and cuBLAS heuristics
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1000;
}

// A speculative step's check at `batch`: each sequence feeds 1 + k tokens after a context of `ctx` (the same
// positions every step) with every row's argmax taken on the device, as the executor checks greedy guesses.
double verify_step_ms(Model& m, int batch, int k, int ctx, int steps, int blocks_per_seq) {
  const int32_t V = m.config().vocab_size;
  ForwardOutput out;
  std::vector<double> times;
  for (int step = 0; step < steps + 3; ++step) {
    std::vector<SequenceChunk> chunks;
    for (int s = 0; s < batch; ++s) {
      SequenceChunk c;
      for (int i = 0; i <= k; ++i) c.tokens.push_back((step * 31 + s * 7 + i * 13) % V);
      c.past_len = ctx;
      for (int b = 0; b < blocks_per_seq; ++b) c.block_ids.push_back(s * blocks_per_seq + b);
      c.all_logits = true;
      c.sample_on = SampleOn::device_argmax;
      chunks.push_back(std::move(c));
    }
    ProfileRange range("verify", step == steps + 2);
    const double t0 = now();
    m.forward(chunks, out);
    if (step >= 3) times.push_back(now() - t0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1000;
}

// A Medusa step at batch 1: a tree of `nodes` tokens (the root and nodes - 1 candidates of `choices`) after `ctx`
// positions with every row's argmax on the device, then the heads on one row, as the executor runs them. Medians
// of the whole step and of its two parts (each ends in a synchronisation: the check's argmaxes, the heads' ids).
struct MedusaStep {
  double step_ms, check_ms, heads_ms;
};
MedusaStep medusa_step_ms(Model& m, const MedusaChoices& choices, int heads, int nodes, int ctx, int steps,
                          int blocks_per_seq) {
  const int32_t V = m.config().vocab_size;
  std::vector<int32_t> top(static_cast<size_t>(heads) * kMedusaTopK);
  for (size_t i = 0; i < top.size(); ++i) top[i] = static_cast<int32_t>((i * 7919) % V);
  const TokenTree tree = build_token_tree(choices, top.data(), nodes - 1, heads);
  ForwardOutput out;
  std::vector<int32_t> guesses;
  std::vector<double> times, checks, head_times;
  for (int step = 0; step < steps + 3; ++step) {
    SequenceChunk c;
    c.tokens.push_back((step * 31) % V);
    c.tokens.insert(c.tokens.end(), tree.tokens.begin(), tree.tokens.end());
    c.tree_parents.push_back(-1);
    c.tree_parents.insert(c.tree_parents.end(), tree.parents.begin(), tree.parents.end());
    c.past_len = ctx;
    for (int b = 0; b < blocks_per_seq; ++b) c.block_ids.push_back(b);
    c.all_logits = true;
    c.sample_on = SampleOn::device_argmax;
    const double t0 = now();
    m.forward({c}, out);
    const double t1 = now();
    m.head_guesses({static_cast<int32_t>(c.tokens.size()) - 1}, guesses);
    const double t2 = now();
    if (step < 3) continue;
    times.push_back(t2 - t0);
    checks.push_back(t1 - t0);
    head_times.push_back(t2 - t1);
  }
  auto median_ms = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1000;
  };
  return {median_ms(times), median_ms(checks), median_ms(head_times)};
}

// Tokens one step yields with k guesses each kept with probability a (independently, until the first miss).
double tokens_per_step(double a, int k) { return (1.0 - std::pow(a, k + 1)) / (1.0 - a); }

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress reaches a log even if the run is cut short
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda-bench <checkpoint dir> [--dummy] [--batches 1,8,64,256] [--ctx 128] ...\n");
    return 2;
  }
  std::string dir = argv[1], dtype = "auto", json_path, quantization, kv_cache_dtype = "auto", draft_dir;
  bool dummy = false, sampled = false;
  std::vector<int> batches = {1, 8, 64, 256}, verify, trees = {4, 8, 16, 32};
  int medusa = 0;
  int ctx = 128, steps = 30, requests = 1000, input = 128, output = 128, max_batch = 256, ngram = 0;
  int max_num_tokens = 8192;
  int lora_n = 0, lora_rank = 16;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--dummy") dummy = true;
    else if (a == "--batches") batches = parse_list(next());
    else if (a == "--ctx") ctx = std::stoi(next());
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--requests") requests = std::stoi(next());
    else if (a == "--input") input = std::stoi(next());
    else if (a == "--output") output = std::stoi(next());
    else if (a == "--max-batch") max_batch = std::stoi(next());
    else if (a == "--max-num-tokens") max_num_tokens = std::stoi(next());
    else if (a == "--dtype") dtype = next();
    else if (a == "--json") json_path = next();
    else if (a == "--profile") {
      g_profile = next();
      if (g_profile != "prefill" && g_profile != "decode" && g_profile != "verify" && g_profile != "decode-lora") {
        std::fprintf(stderr, "cuda-bench: --profile must be prefill, decode, decode-lora or verify, got \"%s\"\n",
                     g_profile.c_str());
        return 2;
      }
    }
    else if (a == "--sampled") sampled = true;
    else if (a == "--verify") verify = parse_list(next());
    else if (a == "--medusa") medusa = std::stoi(next());
    else if (a == "--trees") trees = parse_list(next());
    else if (a == "--ngram") ngram = std::stoi(next());
    else if (a == "--lora") {
      const std::vector<int> v = parse_list(next());
      if (v.empty() || v[0] < 0 || (v[0] > 0 && (v.size() != 2 || v[1] < 1))) {
        std::fprintf(stderr, "cuda-bench: --lora takes N,R (N adapters of rank R; 0: none)\n");
        return 2;
      }
      lora_n = v[0];
      if (v.size() > 1) lora_rank = v[1];
    }
    else if (a == "--draft") draft_dir = next();
    else if (a == "--quantization") {
      quantization = next();
      if (quantization != "fp8") {
        std::fprintf(stderr, "cuda-bench: --quantization must be fp8, got \"%s\"\n", quantization.c_str());
        return 2;
      }
    }
    else if (a == "--kv-cache-dtype") {
      kv_cache_dtype = next();
      if (kv_cache_dtype != "fp8" && kv_cache_dtype != "auto") {
        std::fprintf(stderr, "cuda-bench: --kv-cache-dtype must be auto or fp8, got \"%s\"\n", kv_cache_dtype.c_str());
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "cuda-bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    std::printf("SKIP: %s; GPUs visible: %d\n", cuda_backend_status(), cuda_device_count());
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs, %.1f GiB; %s\n", prop.name, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0, cuda_backend_status());
  const double bw = copy_bandwidth();
  std::printf("copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);

  LoadOptions lo = cudatest::options(Device::cuda, dummy ? "dummy" : "auto");
  lo.dtype = dtype;
  lo.quantization = quantization;
  lo.kv_cache_dtype = kv_cache_dtype;
  lo.max_num_tokens = max_num_tokens;
  lo.max_batch_size = max_batch;
  double t0 = now();
  std::unique_ptr<Model> model = load_model(dir, lo);
  const size_t base_weight_bytes = model->weight_bytes();
  if (medusa > 0) {
    std::printf("making %d dummy Medusa heads ...\n", medusa);
    model->set_medusa_heads(test::random_medusa_heads(model->config().hidden_size, model->config().vocab_size, medusa));
  }
  const double load_s = now() - t0;
  const double wbytes = static_cast<double>(base_weight_bytes);  // (the model's own: not the --medusa heads)
  auto* cuda_model = dynamic_cast<cuda::CudaDecoder*>(model.get());
  // What a decode step reads: every weight but an embedding table the LM head does not share.
  const double rbytes = cuda_model != nullptr ? static_cast<double>(cuda_model->decode_read_bytes()) : wbytes;
  std::printf("loaded %s (%s, %s, KV %s) in %.1f s: %.2f GB of weights, %.2f GB read per decode step\n",
              dir.c_str(), dummy ? "dummy weights" : "checkpoint",
              cuda_model != nullptr && cuda_model->fp8() ? "fp8 projections, bf16 LM head" : "16-bit",
              model->kv_cache_dtype().c_str(), load_s, wbytes / 1e9, rbytes / 1e9);

  // --lora: the adapters, loaded into slots 0 .. N-1 (the executor's runs get the same ones by task id).
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  if (lora_n > 0) {
    if (!model->supports_lora()) {
      std::fprintf(stderr, "cuda-bench: --lora on a model without LoRA support\n");
      return 2;
    }
    const ModelConfig& c = model->config();
    std::vector<int32_t> layers;
    for (int32_t l = 0; l < c.num_layers; ++l) layers.push_back(l);
    const std::vector<LoraModule> modules = {LoraModule::attn_q,      LoraModule::attn_k,      LoraModule::attn_v,
                                             LoraModule::attn_dense,  LoraModule::mlp_h_to_4h, LoraModule::mlp_gate,
                                             LoraModule::mlp_4h_to_h};
    t0 = now();
    // A in 1/32 steps (x Aᵀ about a projection output's size), B in 1/128 steps: deltas a few percent of the
    // outputs, so the activations stay those of the base model's scale.
    for (int i = 0; i < lora_n; ++i) {
      adapters.push_back(std::make_shared<LoraAdapter>(cudatest::dummy_lora_adapter(
          c, lora_rank, modules, layers, 1000 + static_cast<uint64_t>(i), 1.0f / 32, 1.0f / 128)));
      model->load_lora(i, *adapters.back());
    }
    std::printf("LoRA: %d adapters of rank %d on q, k, v, o, gate, up, down of %d layers (%.1f MB each in fp32), "
                "loaded in %.1f s\n",
                lora_n, lora_rank, c.num_layers, static_cast<double>(adapters[0]->bytes()) / 1e6, now() - t0);
  }

  // Decode steps.
  const int tpb = 64;
  const int max_b = *std::max_element(batches.begin(), batches.end());
  const int blocks_per_seq = (ctx + steps + 8 + tpb - 1) / tpb;
  model->allocate_kv(max_b * blocks_per_seq, tpb);
  std::printf("\n| batch | decode step (ms) | tokens/s | weights / step vs copy bandwidth | read / step vs copy bandwidth "
              "|\n|---|---|---|---|---|\n");
  std::vector<StepResult> results;
  std::vector<double> lora_ms;  // per batch, with --lora
  std::vector<std::string> lora_rounds;  // per batch, with --lora: each round's pair
  for (int b : batches) {
    double ms = 0;
    if (lora_n > 0) {
      // The base and the LoRA step in kLoraRounds alternating pairs, medians of each: a clock or thermal drift
      // within the process (the first base measurement of a run was often the odd one) reaches both sides alike.
      constexpr int kLoraRounds = 3;
      std::vector<double> base_r, lora_r;
      std::string pairs;
      for (int r = 0; r < kLoraRounds; ++r) {
        base_r.push_back(decode_step_ms(*model, b, ctx, steps, tpb, blocks_per_seq));
        lora_r.push_back(decode_step_ms(*model, b, ctx, steps, tpb, blocks_per_seq, lora_n));
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%.3f / %.3f", r > 0 ? ", " : "", base_r.back(), lora_r.back());
        pairs += buf;
      }
      std::sort(base_r.begin(), base_r.end());
      std::sort(lora_r.begin(), lora_r.end());
      ms = base_r[kLoraRounds / 2];
      lora_ms.push_back(lora_r[kLoraRounds / 2]);
      lora_rounds.push_back(pairs);
    } else {
      ms = decode_step_ms(*model, b, ctx, steps, tpb, blocks_per_seq);
    }
    results.push_back({b, ms});
    std::printf("| %d | %.3f | %.0f | %.1f%% | %.1f%% |\n", b, ms, b * 1000.0 / ms, 100.0 * (wbytes / (ms / 1000)) / bw,
                100.0 * (rbytes / (ms / 1000)) / bw);
  }
  if (lora_n > 0) {
    std::printf("\n| batch | base step (ms) | step with LoRA, %d adapters of rank %d round-robin (ms) | throughput vs base "
                "| step overhead |\n|---|---|---|---|---|\n",
                lora_n, lora_rank);
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("| %d | %.3f | %.3f | %.3f | %+.1f%% |\n", results[i].batch, results[i].step_ms, lora_ms[i],
                  results[i].step_ms / lora_ms[i], 100.0 * (lora_ms[i] / results[i].step_ms - 1));
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("lora decode batch %d: base %.3f ms, with %d adapters of rank %d %.3f ms: throughput ratio %.3f "
                  "(step overhead %+.1f%%; medians of the rounds base / LoRA: %s)\n",
                  results[i].batch, results[i].step_ms, lora_n, lora_rank, lora_ms[i], results[i].step_ms / lora_ms[i],
                  100.0 * (lora_ms[i] / results[i].step_ms - 1), lora_rounds[i].c_str());
  }
  double cublas_ms = 0;
  if (cuda_model != nullptr && g_profile.empty() && lora_n == 0) {
    cuda_model->gemm().set_use_gemv(false);
    cuda_model->set_use_graphs(false);  // (re-captured below with the other GEMM choice)
    cuda_model->set_use_graphs(true);
    cublas_ms = decode_step_ms(*model, 1, ctx, steps, tpb, blocks_per_seq);
    cuda_model->gemm().set_use_gemv(true);
    cuda_model->set_use_graphs(false);  // drops the graphs captured with cuBLAS alone
    const double nograph_ms = decode_step_ms(*model, 1, ctx, steps, tpb, blocks_per_seq);
    cuda_model->set_use_graphs(true);
    cuda::set_pdl(false);  // graphs captured from here on launch every kernel the ordinary way
    cuda_model->set_use_graphs(true);
    const double nopdl_ms = decode_step_ms(*model, 1, ctx, steps, tpb, blocks_per_seq);
    cuda::set_pdl(true);
    cuda_model->set_use_graphs(true);
    std::printf("| 1 (no CUDA graph) | %.3f | %.0f | %.1f%% |\n", nograph_ms, 1000.0 / nograph_ms,
                100.0 * (wbytes / (nograph_ms / 1000)) / bw);
    std::printf("| 1 (no programmatic dependent launch) | %.3f | %.0f | %.1f%% |\n", nopdl_ms, 1000.0 / nopdl_ms,
                100.0 * (wbytes / (nopdl_ms / 1000)) / bw);
    std::printf("| 1 (cuBLAS only) | %.3f | %.0f | %.1f%% |\n", cublas_ms, 1000.0 / cublas_ms,
                100.0 * (wbytes / (cublas_ms / 1000)) / bw);
  }
  // Speculation's check against the decode step of the same batch (measured above, same positions give or take).
  if (!verify.empty()) {
    const int max_k = *std::max_element(verify.begin(), verify.end());
    if (ctx + max_k + 1 > blocks_per_seq * tpb) {
      std::fprintf(stderr, "cuda-bench: --verify %d needs --steps >= %d\n", max_k, max_k - 7);
      return 2;
    }
    std::printf("\n| batch | K guesses | verify step (ms) | vs decode step | speedup at acceptance 0.5 / 0.7 / 0.9 "
                "(no drafter cost) |\n|---|---|---|---|---|\n");
    std::vector<std::pair<int, double>> batch1_checks;  // (K, ms) at batch 1, for the draft model's table
    for (int b : batches) {
      double decode_ms = 0;
      for (const StepResult& r : results)
        if (r.batch == b) decode_ms = r.step_ms;
      for (int k : verify) {
        const double ms = verify_step_ms(*model, b, k, ctx, steps, blocks_per_seq);
        if (b == 1) batch1_checks.emplace_back(k, ms);
        const double c = ms / decode_ms;
        std::printf("| %d | %d | %.3f | %.2fx | %.2fx / %.2fx / %.2fx |\n", b, k, ms, c, tokens_per_step(0.5, k) / c,
                    tokens_per_step(0.7, k) / c, tokens_per_step(0.9, k) / c);
      }
    }
    if (!draft_dir.empty() && !batch1_checks.empty()) {
      double decode1 = 0;
      for (const StepResult& r : results)
        if (r.batch == 1) decode1 = r.step_ms;
      std::unique_ptr<Model> draft = load_model(draft_dir, lo);
      draft->allocate_kv(blocks_per_seq, tpb);
      const double draft_ms = decode_step_ms(*draft, 1, ctx, steps, tpb, blocks_per_seq);
      std::printf("\ndraft model %s: %.2f GB of weights, batch-1 decode step %.3f ms (%.2f of the model's)\n",
                  draft_dir.c_str(), static_cast<double>(draft->weight_bytes()) / 1e9, draft_ms, draft_ms / decode1);
      std::printf("\n| K guesses | K draft steps + check (ms) | vs decode step | speedup at acceptance 0.5 / 0.7 / 0.9 "
                  "|\n|---|---|---|---|\n");
      for (const auto& [k, check_ms] : batch1_checks) {
        const double c = (k * draft_ms + check_ms) / decode1;
        std::printf("| %d | %.3f | %.2fx | %.2fx / %.2fx / %.2fx |\n", k, k * draft_ms + check_ms, c,
                    tokens_per_step(0.5, k) / c, tokens_per_step(0.7, k) / c, tokens_per_step(0.9, k) / c);
      }
    }
  }
  if (medusa > 0) {
    const int max_t = *std::max_element(trees.begin(), trees.end());
    if (ctx + max_t > blocks_per_seq * tpb) {
      std::fprintf(stderr, "cuda-bench: --trees %d needs --steps >= %d\n", max_t, max_t - 8);
      return 2;
    }
    double decode1 = 0;
    for (const StepResult& r : results)
      if (r.batch == 1) decode1 = r.step_ms;
    const MedusaChoices choices = default_medusa_choices(medusa);
    std::printf("\n%d dummy Medusa heads (%.2f GB in the model dtype); batch-1 decode step %.3f ms\n", medusa,
                static_cast<double>(model->weight_bytes() - base_weight_bytes) / 1e9, decode1);
    std::printf("\n| tree (tokens checked) | Medusa step (ms) | the check (ms) | the heads (ms) | vs decode step | "
                "speedup at 2.0 / 2.5 / 3.0 tokens a step |\n|---|---|---|---|---|---|\n");
    for (int t : trees) {
      const MedusaStep ms = medusa_step_ms(*model, choices, medusa, t, ctx, steps, blocks_per_seq);
      const double c = ms.step_ms / decode1;
      std::printf("| %d | %.3f | %.3f | %.3f | %.2fx | %.2fx / %.2fx / %.2fx |\n", t, ms.step_ms, ms.check_ms,
                  ms.heads_ms, c, 2.0 / c, 2.5 / c, 3.0 / c);
    }
  }
  const double roofline_ms = wbytes / bw * 1000;
  std::printf("batch-1 roofline (weights / copy bandwidth): %.3f ms; bytes read per step / copy bandwidth: %.3f ms\n",
              roofline_ms, rbytes / bw * 1000);

  // Offline throughput through the executor.
  double tok_s = 0, offline_s = 0;
  int64_t out_tokens = 0, pool_tokens = 0;
  double lora_tok_s = 0;
  // --lora: the base run, then the same traffic with request i on adapter i % N (each adapter sent once, with the
  // first request naming its task; the warm-up requests do that, so the measured part loads no adapter).
  for (int run = 0; requests > 0 && run < (lora_n > 0 ? 2 : 1); ++run) {
    const bool with_lora = run == 1;
    model.reset();
    std::unique_ptr<Model> m2 = load_model(dir, lo);
    ExecutorConfig cfg;
    cfg.max_batch_size = max_batch;
    cfg.max_num_tokens = max_num_tokens;
    cfg.tokens_per_block = tpb;
    cfg.iter_stats_max_iterations = 1 << 20;  // every measured iteration, for the breakdown
    cfg.ngram_speculation.max_draft_tokens = ngram;
    if (with_lora) {
      cfg.lora.enabled = true;
      cfg.lora.max_loras = lora_n;
      cfg.lora.max_adapter_size = std::max(64, lora_rank);
      // The host cache must hold every adapter (an evicted task would have to be sent again).
      cfg.lora.host_memory_bytes = std::max<int64_t>(cfg.lora.host_memory_bytes,
                                                     static_cast<int64_t>((lora_n + 1) * adapters[0]->bytes()));
    }
    std::vector<bool> sent(static_cast<size_t>(lora_n), false);
    auto decorate = [&](Request& r, int i) {
      if (!with_lora) return;
      const int task = i % lora_n;
      LoraRequest lr;
      lr.task_id = static_cast<uint64_t>(task) + 1;
      if (!sent[static_cast<size_t>(task)]) lr.adapter = adapters[static_cast<size_t>(task)];
      sent[static_cast<size_t>(task)] = true;
      r.lora = lr;
    };
    Executor ex(std::move(m2), cfg);
    const KvCacheStats kv = ex.kv_cache_stats();
    pool_tokens = static_cast<int64_t>(kv.max_num_blocks) * kv.tokens_per_block;
    std::printf("\nKV pool (%s): %d blocks of %d tokens = %lld tokens\n", ex.kv_cache_dtype().c_str(),
                kv.max_num_blocks, kv.tokens_per_block, static_cast<long long>(pool_tokens));
    const cudatest::OfflineResult res = cudatest::run_offline(ex, requests, input, output,
                                                             std::max(std::min(max_batch, 32), lora_n), sampled,
                                                             decorate);
    if (with_lora) {
      lora_tok_s = res.tokens / res.seconds;
      std::printf("\noffline with LoRA (%d adapters of rank %d, request i on adapter i %% %d): %d requests %d/%d, "
                  "max batch %d: %lld output tokens in %.2f s = %.0f output tokens/s (%d failed, %zu answered); "
                  "throughput vs base %.3f\n",
                  lora_n, lora_rank, lora_n, requests, input, output, max_batch, static_cast<long long>(res.tokens),
                  res.seconds, lora_tok_s, res.failed, res.answered, tok_s > 0 ? lora_tok_s / tok_s : 0.0);
      std::printf("lora offline: base %.0f output tokens/s, with %d adapters of rank %d %.0f output tokens/s: "
                  "throughput ratio %.3f (%d failed)\n",
                  tok_s, lora_n, lora_rank, lora_tok_s, tok_s > 0 ? lora_tok_s / tok_s : 0.0, res.failed);
      cudatest::print_breakdown(ex.get_latest_iteration_stats(), res.seconds);  // (prompt steps against decode ones)
      continue;
    }
    offline_s = res.seconds;
    out_tokens = res.tokens;
    tok_s = out_tokens / offline_s;
    int64_t drafted = 0, accepted = 0;
    const std::deque<IterationStats> stats = ex.get_latest_iteration_stats();
    for (const IterationStats& st : stats)
      drafted += st.spec_decoding_stats.num_draft_tokens, accepted += st.spec_decoding_stats.num_accepted_tokens;
    if (ngram > 0)
      std::printf("\nprompt lookup (--ngram %d): %lld guesses checked, %lld kept\n",
                  ngram, static_cast<long long>(drafted), static_cast<long long>(accepted));
    std::printf("\noffline (executor, C++%s%s): %d requests %d/%d, max batch %d: %lld output tokens in %.2f s = %.0f "
                "output tokens/s (%d failed, %zu answered)\n",
                sampled ? ", sampled: t 0.8, top-p 0.95" : "", ngram > 0 ? ", prompt lookup" : "", requests, input, output, max_batch,
                static_cast<long long>(out_tokens), offline_s, tok_s, res.failed, res.answered);
    cudatest::print_breakdown(stats, offline_s);
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    std::fprintf(f, "{\"device\": \"%s\", \"quantization\": \"%s\", \"kv_cache_dtype\": \"%s\", \"kv_pool_tokens\": %lld, "
                    "\"copy_bandwidth\": %.0f, \"weight_bytes\": %.0f, "
                    "\"decode_read_bytes\": %.0f, \"load_s\": %.2f, \"roofline_ms\": %.4f, "
                    "\"cublas_only_batch1_ms\": %.4f, \"steps\": [",
                 prop.name, quantization.empty() ? "none" : quantization.c_str(), kv_cache_dtype.c_str(),
                 static_cast<long long>(pool_tokens), bw, wbytes, rbytes, load_s,
                 roofline_ms, cublas_ms);
    for (size_t i = 0; i < results.size(); ++i)
      std::fprintf(f, "%s{\"batch\": %d, \"ms\": %.4f}", i ? ", " : "", results[i].batch, results[i].step_ms);
    std::fprintf(f, "], \"offline\": {\"requests\": %d, \"output_tokens\": %lld, \"seconds\": %.3f, \"tok_s\": %.1f}",
                 requests, static_cast<long long>(out_tokens), offline_s, tok_s);
    if (lora_n > 0) {
      std::fprintf(f, ", \"lora\": {\"adapters\": %d, \"rank\": %d, \"offline_tok_s\": %.1f, \"steps\": [", lora_n,
                   lora_rank, lora_tok_s);
      for (size_t i = 0; i < lora_ms.size(); ++i)
        std::fprintf(f, "%s{\"batch\": %d, \"ms\": %.4f}", i ? ", " : "", results[i].batch, lora_ms[i]);
      std::fprintf(f, "]}");
    }
    std::fprintf(f, "}\n");
    std::fclose(f);
  }
  return 0;
}
