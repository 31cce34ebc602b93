// The CUDA backend on a GPU (built and registered only with the backend): the fixture checkpoints against
// Hugging Face transformers' float64 reference (reference.safetensors) and against the CPU model; dummy-weight
// models of other shapes (GQA with head_dim 128 and llama3 rope, GPT-2's LayerNorm / biases / learned positions,
// Qwen2's qkv biases) against the CPU model with the very same weights, over contexts long enough for the
// attention's tiles and splits, mixed prefill / chunked-context / decode batches in scrambled blocks; block copies;
// greedy sampling on the device; and the executor over the CUDA model (device greedy path, host sampling path,
// KV pressure, cancellation). bf16 weights and KV: logits within 1e-2 relative error.
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/cuda-decoder.h"
#include "cuda/kernels.h"
#include "loading/checkpoint.h"
#include "loading/json.h"
#include "loading/safetensors.h"
#include "model/model-checks.h"

using namespace engine;
using cudatest::rel_err;

namespace {

constexpr double kTol = 1e-2;
// Per fixture case: max |our context logits - transformers'| (the executor check judges only clear margins).
std::map<std::string, std::vector<double>> g_abs_err;

std::vector<int32_t> scrambled_blocks(int32_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t i = 0; i < n; ++i) ids[i] = (i * 37 + 11) % n;
  return ids;
}

// tol: relative L2 error of the GPU's (bf16) context logits. FP8 fixtures pass 1.5x kTol: the GPU widens their
// e4m3 x scale weights to bf16 for prefill products, one rounding of the weights the 16-bit fixtures (bf16-exact
// by construction) do not have; measured 0.0083-0.0110 on an H200 against 0.0062-0.0079 for those (2026-11-23).
void fixture_vs_reference(const std::string& dir, const std::string& label, double tol = kTol) {
  auto gpu = load_model(dir, cudatest::options(Device::cuda));
  auto cpu = load_model(dir, cudatest::options(Device::cpu));
  const int32_t vocab = gpu->config().vocab_size;
  gpu->allocate_kv(64, 16);
  cpu->allocate_kv(64, 16);
  const std::vector<int32_t> blocks = scrambled_blocks(64);
  json::Value ref = json::parse_file(dir + "/reference.json");
  SafetensorsFile ref_tensors(dir + "/reference.safetensors");
  const auto& cases = ref.find("cases")->as_array();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const json::Value& c = cases[ci];
    const std::string name = label + "/" + c.find("name")->as_string();
    std::vector<int32_t> input;
    for (const auto& v : c.find("input_ids")->as_array()) input.push_back(static_cast<int32_t>(v.as_int64()));
    const int32_t n = static_cast<int32_t>(input.size());
    ForwardOutput og, oc;
    gpu->forward({{input, 0, blocks, true}}, og);
    cpu->forward({{input, 0, blocks, true}}, oc);
    if (const char* dump = std::getenv("CUDA_MODEL_DUMP")) {
      // For scripts/gpu/hf_compare.py: the context logits as raw fp32, [n, vocab].
      const std::string path = std::string(dump) + "/" + label + "-case" + std::to_string(ci) + ".f32";
      if (FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(og.logits.data(), sizeof(float), og.logits.size(), f);
        std::fclose(f);
      }
    }
    const TensorInfo* want = ref_tensors.find("case" + std::to_string(ci) + ".context_logits");
    CHECK(want && want->numel() == static_cast<int64_t>(og.logits.size()));
    double abs_err = 0;
    if (want && want->numel() == static_cast<int64_t>(og.logits.size())) {
      const float* w = reinterpret_cast<const float*>(want->data);
      const double e_ref = rel_err(og.logits.data(), w, og.logits.size());
      const double e_cpu = rel_err(og.logits.data(), oc.logits.data(), og.logits.size());
      abs_err = cudatest::max_abs_err(og.logits.data(), w, og.logits.size());
      std::printf("%s: context logits rel err (L2) vs transformers %.3g, vs CPU model %.3g; max abs err %.3g\n",
                  name.c_str(), e_ref, e_cpu, abs_err);
      CHECK_MSG(e_ref < tol, "%s: rel err %g vs transformers", name.c_str(), e_ref);
      CHECK_MSG(e_cpu < tol, "%s: rel err %g vs the CPU model", name.c_str(), e_cpu);
    }
    g_abs_err[label].push_back(abs_err);
    // Greedy decode through the paged KV with argmax on the device, teacher-forced on transformers' greedy
    // tokens: each step's device argmax must be transformers' token wherever the top-1 margin (measured on the
    // CPU model, fp32 like transformers) exceeds twice our logits error; closer calls are counted, not judged.
    std::vector<int32_t> want_ids;
    for (const auto& v : c.find("greedy_output_ids")->as_array()) want_ids.push_back(static_cast<int32_t>(v.as_int64()));
    std::vector<double> want_lp;
    for (const auto& v : c.find("greedy_log_probs")->as_array()) want_lp.push_back(v.as_number());
    const double close = 2 * abs_err;
    int judged = 0, agreed = 0, too_close = 0;
    double lp_err = 0;
    std::vector<int32_t> got;
    const float* last_cpu = oc.logits.data() + static_cast<size_t>(n - 1) * vocab;
    int32_t ours = cudatest::argmax(og.logits.data() + static_cast<size_t>(n - 1) * vocab, vocab);
    double margin = cudatest::top1_margin(last_cpu, vocab);
    for (size_t step = 0; step < want_ids.size(); ++step) {
      got.push_back(ours);
      if (margin > close) {
        ++judged;
        agreed += ours == want_ids[step];
      } else {
        ++too_close;
      }
      if (step + 1 == want_ids.size()) break;
      SequenceChunk ch{{want_ids[step]}, n + static_cast<int32_t>(step), blocks, false};
      ForwardOutput cpu_row;
      cpu->forward({ch}, cpu_row);
      margin = cudatest::top1_margin(cpu_row.logits.data(), vocab);
      ch.sample_on = SampleOn::device_argmax;
      ForwardOutput o;
      gpu->forward({ch}, o);
      CHECK(o.first_row.size() == 1 && o.first_row[0] == -1 && o.logits.empty());
      ours = o.sampled[0].token;
      if (margin > close && step + 1 < want_lp.size() && ours == want_ids[step + 1])
        lp_err = std::max(lp_err, std::fabs(o.sampled[0].log_prob - want_lp[step + 1]));
    }
    if (const char* dump = std::getenv("CUDA_MODEL_DUMP")) {
      const std::string path = std::string(dump) + "/" + label + "-case" + std::to_string(ci) + ".greedy.txt";
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        for (int32_t t : got) std::fprintf(f, "%d ", t);
        std::fclose(f);
      }
    }
    std::printf("%s: greedy (teacher-forced) %d/%d steps equal transformers, %d too close to call (margin <= %.3g); "
                "log-prob max abs err %.3g\n",
                name.c_str(), agreed, judged, too_close, close, lp_err);
    CHECK_MSG(agreed == judged, "%s: greedy token differs from transformers at a clear margin", name.c_str());
    CHECK_MSG(lp_err <= close + 1e-3, "%s: greedy log-prob err %g", name.c_str(), lp_err);
  }
}

// One shape, CPU vs GPU with identical dummy weights, over batches that mix every kind of chunk.
// tol: bf16 against the fp32 CPU model (a decode batch gets twice it; see compare below). kv_cache_dtype "fp8":
// both store K/V as e4m3 (LoadOptions::kv_cache_dtype).
void dummy_vs_cpu(const std::string& label, const std::string& config_json, double tol = kTol,
                  const std::string& kv_cache_dtype = "auto") {
  const std::string dir = cudatest::write_config(label, config_json);
  LoadOptions go = cudatest::options(Device::cuda, "dummy"), co = cudatest::options(Device::cpu, "dummy");
  go.kv_cache_dtype = co.kv_cache_dtype = kv_cache_dtype;
  auto gpu = load_model(dir, go);
  auto cpu = load_model(dir, co);
  if (kv_cache_dtype == "fp8") {
    CHECK_MSG(gpu->kv_cache_dtype() == "fp8 (e4m3, per-layer k/v scales 1 (dummy weights))", "%s",
              gpu->kv_cache_dtype().c_str());
    CHECK(gpu->kv_bytes_per_token() == cpu->kv_bytes_per_token());  // one byte a value on both
  }
  const int32_t V = gpu->config().vocab_size, tpb = 16, nb = 256;
  gpu->allocate_kv(nb, tpb);
  cpu->allocate_kv(nb, tpb);
  const std::vector<int32_t> all = scrambled_blocks(nb);
  // Disjoint block tables for four sequences.
  std::vector<std::vector<int32_t>> table(4);
  for (int s = 0; s < 4; ++s) table[s].assign(all.begin() + s * 64, all.begin() + (s + 1) * 64);
  auto prompt = [&](int n, int salt) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7919 + salt * 104729) % V;
    return t;
  };
  // A decode batch's 3 rows sit at the end of 700-token contexts: their error moves with which product path (GEMV
  // or cuBLAS, chosen by timing on the machine) each shape took — qwen2-bias measured 0.0073 on an H100 and 0.0146
  // on an H200 with the same code, every other comparison equal to 3 digits. They get twice the tolerance.
  auto compare = [&](const std::vector<SequenceChunk>& chunks, const char* what) {
    const double tol_here = std::strcmp(what, "decode-batch") == 0 ? 2 * tol : tol;
    ForwardOutput og, oc;
    gpu->forward(chunks, og);
    cpu->forward(chunks, oc);
    CHECK(og.first_row == oc.first_row);
    CHECK(og.logits.size() == oc.logits.size());
    const double e = og.logits.size() == oc.logits.size() ? rel_err(og.logits.data(), oc.logits.data(), oc.logits.size()) : 1;
    std::printf("%s/%s: logits rel err vs CPU %.3g (%zu rows)\n", label.c_str(), what, e, oc.logits.size() / V);
    CHECK_MSG(e < tol_here, "%s/%s: rel err %g", label.c_str(), what, e);
    return std::make_pair(std::move(og), std::move(oc));
  };
  const int long_len = std::min(700, gpu->config().max_position_embeddings - 40);
  // Iteration 1: a long prompt (several attention tiles) next to a short one, every row's logits.
  compare({{prompt(long_len, 1), 0, table[0], true}, {prompt(37, 2), 0, table[1], true}}, "prefill");
  // Iteration 2: decode of the long one, a context chunk continuing the short one, a new prompt.
  compare({{{5}, long_len, table[0], false}, {prompt(50, 3), 37, table[1], true}, {prompt(5, 4), 0, table[2], false}},
          "mixed");
  // A lone decode row over the long context: the split (flash-decoding) path.
  compare({{{6}, long_len + 1, table[0], false}}, "split-decode");
  // The same row under a request's window of 50 with the blocks before it released (-1): never read.
  {
    SequenceChunk ch{{6}, long_len + 1, table[0], false};
    ch.window = 50;
    for (int32_t b = 0; b < first_read_position(ch, gpu->config()) / tpb; ++b) ch.block_ids[b] = -1;
    compare({ch}, "window-50-released");
  }
  // Greedy on the device: the argmax of the same row the host got.
  {
    SequenceChunk ch{{7}, long_len + 2, table[0], false};
    ForwardOutput host;
    gpu->forward({ch}, host);
    ch.sample_on = SampleOn::device_argmax;
    ForwardOutput dev;
    gpu->forward({ch}, dev);  // same position again: rewrites identical K/V
    CHECK(dev.first_row[0] == -1 && dev.sampled[0].token == cudatest::argmax(host.logits.data(), V));
    ch.sample_on = SampleOn::host;
    ForwardOutput on_cpu;
    cpu->forward({ch}, on_cpu);  // the CPU pool gets this position's K/V too (the decode batch below reads it)
  }
  // Copy-on-write: the long sequence's blocks copied into sequence 3's table decode to the same logits.
  const int used = (long_len + 3 + tpb - 1) / tpb;
  for (int b = 0; b < used; ++b) {
    gpu->copy_kv_block(table[0][b], table[3][b]);
    cpu->copy_kv_block(table[0][b], table[3][b]);
  }
  ForwardOutput a, b2;
  gpu->forward({{{9}, long_len + 3, table[0], false}}, a);
  gpu->forward({{{9}, long_len + 3, table[3], false}}, b2);
  ForwardOutput c3;
  cpu->forward({{{9}, long_len + 3, table[0], false}}, c3);  // (as above: the CPU pool must hold what the GPU's does)
  CHECK_MSG(a.logits == b2.logits, "%s: logits after copy_kv_block differ", label.c_str());
  // A batch of decode rows (no split) and a bad token id rejected before anything runs.
  std::vector<SequenceChunk> batch;
  for (int s = 0; s < 3; ++s) batch.push_back({{s + 1}, s == 0 ? long_len + 4 : (s == 1 ? 87 : 5), table[s], false});
  auto graphed = compare(batch, "decode-batch");
  // The same batch without the CUDA graph (decode batches replay one by default): the same kernels, same result.
  if (auto* cm = dynamic_cast<cuda::CudaDecoder*>(gpu.get())) {
    cm->set_use_graphs(false);
    ForwardOutput plain;
    gpu->forward(batch, plain);
    cm->set_use_graphs(true);
    // (The graph sizes the attention split by a context bucket: partitions may differ, so fp32 rounding may too.)
    const bool same_size = plain.logits.size() == graphed.first.logits.size();
    const double e = same_size ? rel_err(plain.logits.data(), graphed.first.logits.data(), plain.logits.size()) : 1;
    std::printf("%s/decode-batch: CUDA graph vs plain launches rel err %.3g\n", label.c_str(), e);
    CHECK_MSG(e < 1e-5, "%s: decode logits with and without the CUDA graph differ (%g)", label.c_str(), e);
    // Every dense product through cuBLAS instead of the engine's GEMV: the same answer within the tolerance.
    cm->gemm().set_use_gemv(false);
    cm->set_use_graphs(false);
    ForwardOutput cublas_only;
    gpu->forward(batch, cublas_only);
    cm->gemm().set_use_gemv(true);
    cm->set_use_graphs(true);
    const double ec = cublas_only.logits.size() == graphed.second.logits.size()
                          ? rel_err(cublas_only.logits.data(), graphed.second.logits.data(), cublas_only.logits.size())
                          : 1;
    std::printf("%s/decode-batch: cuBLAS only, rel err vs CPU %.3g\n", label.c_str(), ec);
    CHECK_MSG(ec < 2 * tol, "%s: decode logits with cuBLAS only: rel err %g", label.c_str(), ec);
  }
  ForwardOutput bad;
  CHECK_THROWS(gpu->forward({{{V + 3}, 0, table[2], false}}, bad), "outside the vocabulary");
}

const char* kLlamaGqa = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "intermediate_size": 768,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 1000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 256}, "rope_theta": 500000.0})";
const char* kGpt2 = R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 256, "n_layer": 2, "n_head": 4,
  "n_positions": 1024, "vocab_size": 777, "activation_function": "gelu_new"})";
const char* kQwen2 = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 640,
  "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "rope_theta": 1000000.0})";
// Qwen3: q/k norms, head_dim 128 wider than hidden / heads (64).
const char* kQwen3 = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 640,
  "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "rope_theta": 1000000.0})";

// Sliding windows shorter than the 700-token contexts (several tiles, the split decode), on every layer (Mistral:
// blocks before the window are never read) and on alternate layers with Gemma 2's soft-caps, query scale and
// sandwich norms; Phi-3's longrope, the 700-token sequence past original_max_position_embeddings (long factors) next
// to short ones.
const char* kMistralWindow = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 512, "intermediate_size": 768,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 1000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "sliding_window": 100, "rope_theta": 10000.0})";
const char* kGemma2 = R"({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 640,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "sliding_window": 64, "query_pre_attn_scalar": 144,
  "attn_logit_softcapping": 0.5, "final_logit_softcapping": 2.0, "hidden_activation": "gelu_pytorch_tanh"})";
const char* kPhi3Longrope = R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 640,
  "max_position_embeddings": 2048, "original_max_position_embeddings": 256, "rms_norm_eps": 1e-5,
  "rope_scaling": {"type": "longrope",
    "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 1.05, 1.15, 1.25, 1.35, 1.45],
    "long_factor": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 24.0]}})";

// Mixture-of-experts shapes (issue 25): 16 experts (Qwen3-MoE, renormalised), 8 experts with a shared expert and a
// dense first layer (Qwen2-MoE). Every token takes every expert here (top k = all): which experts a token picks is
// cuda-moe's to check against the host, and with dummy weights' near-tied routers a bf16 run would pick others than
// the fp32 CPU model now and then (a 3-row decode batch once measured 0.70 off for that alone), so these compare
// the arithmetic of both product paths — the tensor-core tiles for prefill, the expert GEMV for decode batches
// (inside CUDA graphs) — with the routing weights, the permutation and the combine, and nothing that can flip.
const char* kQwen3Moe = R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "moe_intermediate_size": 128, "num_experts": 16, "num_experts_per_tok": 16, "norm_topk_prob": true,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 640,
  "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "rope_theta": 1000000.0})";
const char* kQwen2Moe = R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "moe_intermediate_size": 128, "shared_expert_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 8,
  "mlp_only_layers": [0], "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": 640, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": false})";

uint64_t lcg_next(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state;
}

// The decode GEMV (kernels.h) on shapes that take each of its k-splits (1, 2, 4 warps per row pair), odd row counts
// and up to 8 activation rows, against a double-precision product of the same bf16 values; and the same shapes
// through gemv_rms (fp32 x normalised in the kernel) against rms_norm in double followed by the product.
void gemv_rms_check(int64_t m, int64_t n, int64_t k, const std::vector<uint16_t>& w, const void* dw) {
  uint64_t state = 7;
  auto rnd = [&]() { return static_cast<float>(static_cast<int64_t>(lcg_next(state) >> 40) - (1 << 23)) / (1 << 23); };
  std::vector<float> x(static_cast<size_t>(m * k)), g(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = 0; t < k; ++t) x[static_cast<size_t>(i * k + t)] = rnd() * static_cast<float>(i + 1);  // row scales differ
  for (auto& v : g) v = 1.0f + 0.5f * rnd();
  const float eps = 1e-5f;
  void *dx = nullptr, *dg = nullptr, *dy = nullptr;
  cudaMalloc(&dx, x.size() * 4);
  cudaMalloc(&dg, g.size() * 4);
  cudaMalloc(&dy, static_cast<size_t>(m * n) * 4);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dg, g.data(), g.size() * 4, cudaMemcpyHostToDevice);
  cuda::gemv_rms(m, n, k, static_cast<const float*>(dx), static_cast<const float*>(dg), eps, dw, cuda::DType::bf16, dy,
                 true, n, nullptr);
  std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
  cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dg);
  cudaFree(dy);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t t = 0; t < k; ++t) ss += static_cast<double>(x[static_cast<size_t>(i * k + t)]) * x[static_cast<size_t>(i * k + t)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(k) + eps);
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += static_cast<double>(x[static_cast<size_t>(i * k + t)]) * inv * g[static_cast<size_t>(t)] *
               bf16_to_f32(w[static_cast<size_t>(j * k + t)]);
      want[static_cast<size_t>(i * n + j)] = static_cast<float>(acc);
    }
  }
  const double err = rel_err(y.data(), want.data(), y.size());
  std::printf("gemv_rms m %lld n %lld k %lld: rel err %.2e\n", static_cast<long long>(m), static_cast<long long>(n),
              static_cast<long long>(k), err);
  CHECK_MSG(err < 1e-5, "gemv_rms m %lld n %lld k %lld: %.3e", static_cast<long long>(m), static_cast<long long>(n),
            static_cast<long long>(k), err);
}

void gemv_checks() {
  struct Shape { int64_t m, n, k; bool accumulate; };
  for (const Shape& sh : {Shape{1, 28672, 4096, false}, Shape{1, 4096, 4096, false}, Shape{3, 4096, 14336, true},
                          Shape{8, 1001, 8192, false}, Shape{2, 6144, 4096, true}, Shape{5, 37, 2048, false},
                          // one output column (a shared-expert gate's shape), narrower than a warp's two rows
                          Shape{3, 1, 256, false}, Shape{1, 1, 256, false}}) {
    std::vector<uint16_t> x(static_cast<size_t>(sh.m * sh.k)), w(static_cast<size_t>(sh.n * sh.k));
    uint64_t state = 99;
    auto rnd = [&]() {
      return static_cast<float>(static_cast<int64_t>(lcg_next(state) >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
    };
    for (auto& v : x) v = f32_to_bf16(rnd());
    for (auto& v : w) v = f32_to_bf16(rnd() * 0.05f);
    std::vector<float> y0(static_cast<size_t>(sh.m * sh.n));
    for (auto& v : y0) v = rnd();
    void *dx = nullptr, *dw = nullptr, *dy = nullptr;
    cudaMalloc(&dx, x.size() * 2);
    cudaMalloc(&dw, w.size() * 2);
    cudaMalloc(&dy, y0.size() * 4);
    cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
    cuda::gemv(sh.m, sh.n, sh.k, dx, dw, cuda::DType::bf16, dy, true, sh.n, sh.accumulate, nullptr);
    std::vector<float> y(y0.size());
    cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
    gemv_rms_check(sh.m, sh.n, sh.k, w, dw);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
    std::vector<float> want(y0.size());
    for (int64_t i = 0; i < sh.m; ++i)
      for (int64_t j = 0; j < sh.n; ++j) {
        double acc = sh.accumulate ? y0[static_cast<size_t>(i * sh.n + j)] : 0.0;
        for (int64_t t = 0; t < sh.k; ++t)
          acc += static_cast<double>(bf16_to_f32(x[static_cast<size_t>(i * sh.k + t)])) *
                 bf16_to_f32(w[static_cast<size_t>(j * sh.k + t)]);
        want[static_cast<size_t>(i * sh.n + j)] = static_cast<float>(acc);
      }
    const double err = rel_err(y.data(), want.data(), y.size());
    std::printf("gemv m %lld n %lld k %lld%s: rel err %.2e\n", static_cast<long long>(sh.m),
                static_cast<long long>(sh.n), static_cast<long long>(sh.k), sh.accumulate ? " (accumulate)" : "", err);
    CHECK_MSG(err < 1e-5, "gemv m %lld n %lld k %lld: %.3e", static_cast<long long>(sh.m),
              static_cast<long long>(sh.n), static_cast<long long>(sh.k), err);
  }
}

void executor_checks(const std::string& dir) {
  json::Value ref = json::parse_file(dir + "/reference.json");
  const auto& cases = ref.find("cases")->as_array();
  const int32_t gpu_vocab = load_model(dir, cudatest::options(Device::cpu))->config().vocab_size;
  // sample: 1 on the device (temperature + top-k + penalties), 2 on the host (a bad word keeps it there).
  auto run = [&](ExecutorConfig cfg, int copies, int sample) {
    Executor ex(load_model(dir, cudatest::options(Device::cuda)), cfg);
    std::set<RequestId> ids;
    std::vector<std::pair<RequestId, size_t>> which;
    for (int k = 0; k < copies; ++k)
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        Request r;
        for (const auto& v : cases[ci].find("input_ids")->as_array()) r.input_token_ids.push_back(static_cast<int32_t>(v.as_int64()));
        r.max_tokens = static_cast<int32_t>(cases[ci].find("greedy_output_ids")->as_array().size());
        r.output.exclude_input_from_output = true;
        r.output.return_log_probs = true;
        r.streaming = (k % 2) == 1;
        r.sampling.temperature = sample ? 0.8f : 0.0f;
        if (sample) {
          r.sampling.top_k = 20;
          r.sampling.top_p = 0.95f;
          r.sampling.repetition_penalty = 1.1f;
          r.sampling.seed = 1234 + ci;
        }
        if (sample == 2) r.bad_words = {{static_cast<int32_t>(gpu_vocab - 1)}};
        const RequestId id = ex.enqueue(r);
        ids.insert(id);
        which.push_back({id, ci});
      }
    auto out = cudatest::collect(ex, ids);
    std::map<RequestId, std::vector<int32_t>> got;
    int ok = 0;
    for (auto& [id, ci] : which) {
      const cudatest::Outcome& o = out[id];
      std::vector<int32_t> want;
      for (const auto& v : cases[ci].find("greedy_output_ids")->as_array()) want.push_back(static_cast<int32_t>(v.as_int64()));
      // A case whose closest greedy call (min_top1_margin) is within twice our logits error may flip in bf16.
      const double margin = cases[ci].find("min_top1_margin")->as_number();
      const auto& errs = g_abs_err["tiny-llama"];
      const bool clear = ci < errs.size() && margin > 2 * errs[ci];
      const bool full = o.tokens.size() == want.size();
      if (!o.has_error && o.reason == FinishReason::length && full && (sample || !clear || o.tokens == want)) ++ok;
      got[id] = o.tokens;
    }
    // The same case and seed draws the same tokens in every copy (streaming or not), unless bf16 logits that
    // differ slightly between batch shapes move a draw across a boundary: most cases must agree, not all.
    std::map<size_t, std::vector<int32_t>> first;
    std::set<size_t> differ;
    for (auto& [id, ci] : which) {
      auto [it, fresh] = first.emplace(ci, got[id]);
      if (!fresh && it->second != got[id]) differ.insert(ci);
    }
    if (sample) {
      std::printf("executor: %zu of %zu cases drew the same tokens in every copy\n", cases.size() - differ.size(),
                  cases.size());
      CHECK(differ.size() * 2 <= cases.size());
    }
    return std::make_pair(ok, static_cast<int>(which.size()));
  };
  ExecutorConfig base;
  base.tokens_per_block = 16;
  auto [ok1, n1] = run(base, 4, 0);
  std::printf("executor: %d/%d greedy requests complete, equal to transformers where the margin is clear (device greedy, "
              "KV sized from free memory)\n", ok1, n1);
  CHECK(ok1 == n1);
  ExecutorConfig tight = base;
  tight.max_tokens_in_paged_kv_cache = 160;  // a few sequences at a time: pauses and resumes
  auto [ok2, n2] = run(tight, 4, 0);
  std::printf("executor: %d/%d greedy requests likewise under KV pressure (160 tokens)\n", ok2, n2);
  CHECK(ok2 == n2);
  auto [ok3, n3] = run(base, 3, 1);
  std::printf("executor: %d/%d sampled requests (top-k + top-p + repetition penalty, sampled on the GPU) completed\n",
              ok3, n3);
  CHECK(ok3 == n3);
  auto [ok4, n4] = run(base, 2, 2);
  std::printf("executor: %d/%d sampled requests with a bad word (host sampling path) likewise\n", ok4, n4);
  CHECK(ok4 == n4);
  // Cancellation: a long streaming request stops with finish reason cancelled and leaves the pool empty.
  Executor ex(load_model(dir, cudatest::options(Device::cuda)), base);
  Request r;
  r.input_token_ids = {1, 2, 3, 4};
  r.max_tokens = 200;
  r.streaming = true;
  r.sampling.temperature = 0;
  // A few tokens, then the cancel while the loop holds: deterministic however fast the GPU is.
  ex.hold_iterations(3);
  const RequestId id = ex.enqueue(r);
  CHECK(ex.wait_until_held(std::chrono::seconds(60)));
  ex.cancel(id);
  ex.hold_iterations(-1);
  auto out = cudatest::collect(ex, {id});
  CHECK(out[id].reason == FinishReason::cancelled);
  CHECK(ex.kv_cache_stats().used_num_blocks == 0);
  std::printf("executor: cancelled after %zu tokens, %d blocks in use afterwards\n", out[id].tokens.size(),
              ex.kv_cache_stats().used_num_blocks);
}

}  // namespace

TEST_MAIN({
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress reaches a log even if the run is cut short
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  }
  std::printf("%s, %d GPU(s)\n", cuda_backend_status(), cuda_device_count());
  const std::string root = check::repo_root + "/test/fixtures/models";
  for (const char* name : {"tiny-llama", "tiny-llama-sharded", "tiny-gpt2", "tiny-qwen3", "tiny-qwen3-bias", "tiny-phi3", "tiny-gemma",
                           "tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-mixtral", "tiny-mistral-window", "tiny-qwen2-window",
                           "tiny-gemma2", "tiny-phi3-longrope"}) {
    // tiny-gemma passes 2x kTol: its embeddings enter times 8 and its norms scale by (1 + w), 2 to 5 here, so each
    // bf16 rounding of an activation weighs more; measured 0.0127-0.0180 on an H200 (2026-11-26) while the CPU model
    // is within 3.6e-6 of transformers (model-reference) and every clear greedy step is equal.
    // The mixture-of-experts fixtures pass 3x kTol: a router decision closer than bf16's error (the fixtures'
    // smallest gaps between the k-th and next expert are 0.0006-0.004, reference.json's min_router_gap) goes the
    // other way on the GPU than in float64, and that token's layer output moves by a whole expert's share; measured
    // 0.0078-0.0212 in six runs on H100 and H200 (2026-11-26), every clear greedy step equal. The CPU model routes
    // within 2e-6.
    const std::string n(name);
    const bool moe = n.find("moe") != std::string::npos || n == "tiny-mixtral";
    // The window / longrope fixtures pass 1.5x kTol: measured 0.0063-0.0107 on an H200 (2026-11-26), every clear
    // greedy step equal, while the CPU model is within 3e-6 of transformers (bf16 rounding, not the windows).
    const bool wide_head = n == "tiny-mistral-window" || n == "tiny-qwen2-window" || n == "tiny-phi3-longrope";
    const double tol = n == "tiny-gemma" || n == "tiny-gemma2" ? 2 * kTol : moe ? 3 * kTol : wide_head ? 1.5 * kTol : kTol;
    try {
      fixture_vs_reference(root + "/" + name, name, tol);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", name, e.what());
    }
  }
  // FP8 checkpoints (issue 24) uploaded as e4m3 with their scales: with the activations left in 16 bits
  // (TRTLLM_FP8_ACTIVATIONS=0, W8A16) the GPU computes what the fixtures' references do (transformers on the
  // dequantized weights), so they are held to the bf16 tolerances; W8A8's own error is cuda-fp8's to measure.
  setenv("TRTLLM_FP8_ACTIVATIONS", "0", 1);
  for (const char* name : {"tiny-llama-fp8-block", "tiny-llama-fp8-block128", "tiny-llama-fp8-ct-channel",
                           "tiny-llama-fp8-ct-tensor-static", "tiny-llama-fp8-modelopt"}) {
    try {
      fixture_vs_reference(root + "/" + name, name, 1.5 * kTol);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", name, e.what());
    }
  }
  unsetenv("TRTLLM_FP8_ACTIVATIONS");
  for (auto [label, cfg] : {std::pair{"llama-gqa-hd128", kLlamaGqa}, {"gpt2-hd64", kGpt2}, {"qwen2-bias", kQwen2},
                            {"qwen3-hd128", kQwen3}, {"qwen3-moe", kQwen3Moe}, {"qwen2-moe", kQwen2Moe},
                            {"mistral-window-hd128", kMistralWindow}, {"gemma2-hd128", kGemma2},
                            {"phi3-longrope", kPhi3Longrope}}) {
    try {
      dummy_vs_cpu(label, cfg);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", label, e.what());
    }
  }
  // --kv-cache-dtype fp8 on both backends: the GPU's e4m3 pools against the CPU's. 3x kTol: a key or value the
  // GPU computes a bf16 rounding away from the CPU's lands on the other side of an e4m3 rounding boundary now and
  // then, and moves by a whole e4m3 step (up to 1/8 of itself), not by bf16's 1/256.
  for (auto [label, cfg] : {std::pair{"fp8-kv-llama-gqa-hd128", kLlamaGqa}, {"fp8-kv-gpt2-hd64", kGpt2},
                            {"fp8-kv-qwen2-bias", kQwen2}, {"fp8-kv-mistral-window-hd128", kMistralWindow},
                            {"fp8-kv-gemma2-hd128", kGemma2}}) {
    try {
      dummy_vs_cpu(label, cfg, 3 * kTol, "fp8");
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", label, e.what());
    }
  }
  try {
    gemv_checks();
  } catch (const std::exception& e) {
    CHECK_MSG(false, "gemv: %s", e.what());
  }
  try {
    executor_checks(root + "/tiny-llama");
  } catch (const std::exception& e) {
    CHECK_MSG(false, "executor: %s", e.what());
  }
})
