// LoRA on the GPU (issue 29; built and registered only with the CUDA backend, skipped where no GPU is visible):
// the CUDA decoder with adapters in three slots — different ranks (8, 16, 4: not a multiple of the kernels' 8),
// different modules (q/v/o; all seven; the fused attn_qkv and down on two layers only) — against the CPU model
// with the same adapters in the same slots, on batches that mix chunks of every slot and of none: prefill, decode
// (a CUDA graph, and the same step without it), a step mixing decode rows with context chunks, decode batches
// wider than a tile (8 rows of one slot) and wider than the decode GEMV (8 rows: cuBLAS, no fused norm). Also:
// a step with no LoRA row equals, bit for bit, the model before any adapter was loaded; reloading a slot changes
// exactly its rows' output as the CPU model's does; an unloaded slot runs as the base model. Shapes: the GQA
// Llama (RMSNorm fused into the decode GEMV, so the shrink normalises on the fly), Gemma 2 (post-projection norms:
// the deltas join the product before its norm), and the Llama with --quantization fp8 (LoRA stays 16-bit beside
// the e4m3 products), judged by its deltas against the CPU model's. The scenario runs twice: steps of 9-256 tokens
// computing their deltas beside the product (the default) and expanding after it. Also: more slots in a step than
// lora_add has tile blocks; steps of more than 256 tokens (the stacked cuBLAS products, and the tensor-core kernels),
// with ranks of 8, 16 and 24 and a segment edge inside a 16-column group. Adapter values are multiples of 1/128
// times a power of two, exact in bf16, so both models hold the very same adapters.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/cuda-decoder.h"
#include "cuda/lora-rows.h"
#include "lora/lora-adapter.h"

using namespace engine;
using cudatest::rel_err;

namespace {

constexpr double kTol = 1e-2;  // cuda-model's for bf16 logits against the fp32 CPU model

const char* kLlamaGqa = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "intermediate_size": 768,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 1000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 256}, "rope_theta": 500000.0})";
const char* kGemma2 = R"({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 640,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "sliding_window": 64, "query_pre_attn_scalar": 144,
  "attn_logit_softcapping": 0.5, "final_logit_softcapping": 2.0, "hidden_activation": "gelu_pytorch_tanh"})";

constexpr LoraModule kAll7[] = {LoraModule::attn_q,      LoraModule::attn_k,   LoraModule::attn_v,
                                LoraModule::attn_dense,  LoraModule::mlp_h_to_4h, LoraModule::mlp_gate,
                                LoraModule::mlp_4h_to_h};

// A: 1/32 steps (about the dummy weights' scale, so x Aᵀ is O(1)); B: b_scale steps, so that the deltas move the
// logits well beyond the bf16 tolerance without swamping the base model.
LoraAdapter make_adapter(const ModelConfig& c, int32_t rank, const std::vector<LoraModule>& modules,
                         const std::vector<int32_t>& layers, uint64_t seed, float b_scale) {
  return cudatest::dummy_lora_adapter(c, rank, modules, layers, seed, 1.0f / 32, b_scale);
}

std::vector<int32_t> all_layers(const ModelConfig& c) {
  std::vector<int32_t> v;
  for (int32_t l = 0; l < c.num_layers; ++l) v.push_back(l);
  return v;
}

std::vector<int32_t> prompt(int n, int salt, int32_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 7919 + salt * 104729) % vocab;
  return t;
}

SequenceChunk chunk(std::vector<int32_t> tokens, int32_t past, const std::vector<int32_t>& table, int32_t slot,
                    bool all_logits = false) {
  SequenceChunk c{std::move(tokens), past, table, all_logits};
  c.lora_slot = slot;
  return c;
}

// Logit row -> (chunk, slot), for the per-row report.
struct RowInfo {
  int32_t chunk, slot;
};
std::vector<RowInfo> row_info(const std::vector<SequenceChunk>& chunks) {
  std::vector<RowInfo> rows;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const size_t n = chunks[c].all_logits ? chunks[c].tokens.size() : 1;
    for (size_t i = 0; i < n; ++i) rows.push_back({static_cast<int32_t>(c), chunks[c].lora_slot});
  }
  return rows;
}

// Per-row relative errors of a against b; prints the case's overall figures and every row above tol.
bool judge(const std::string& what, const std::vector<float>& a, const std::vector<float>& b, int32_t V,
           const std::vector<RowInfo>& rows, double tol) {
  if (a.size() != b.size() || a.size() != rows.size() * static_cast<size_t>(V)) {
    std::printf("%s: sizes differ: %zu vs %zu (%zu rows of %d expected)\n", what.c_str(), a.size(), b.size(),
                rows.size(), V);
    return false;
  }
  const double e = rel_err(a.data(), b.data(), a.size());
  const double mx = cudatest::max_abs_err(a.data(), b.data(), a.size());
  int bad = 0;
  double worst = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t at = r * static_cast<size_t>(V);
    const double er = rel_err(a.data() + at, b.data() + at, static_cast<size_t>(V));
    worst = std::max(worst, er);
    if (er >= tol) {
      if (bad < 12)
        std::printf("  %s: row %zu (chunk %d, slot %d): rel err %.3g, max abs %.3g\n", what.c_str(), r,
                    rows[r].chunk, rows[r].slot, er,
                    cudatest::max_abs_err(a.data() + at, b.data() + at, static_cast<size_t>(V)));
      ++bad;
    }
  }
  std::printf("%s: rel err %.3g (worst row %.3g), max abs %.3g over %zu rows; %d rows at or above %.3g\n",
              what.c_str(), e, worst, mx, rows.size(), bad, tol);
  return e < tol && bad == 0;
}

struct Pair {
  ForwardOutput gpu, cpu;
};
Pair run_both(Model& gpu, Model& cpu, const std::vector<SequenceChunk>& chunks) {
  Pair p;
  gpu.forward(chunks, p.gpu);
  cpu.forward(chunks, p.cpu);
  return p;
}

// The GPU against the CPU on `chunks`, both with the same adapters; tol for the logits. Returns the outputs.
Pair compare(Model& gpu, Model& cpu, const std::vector<SequenceChunk>& chunks, const std::string& what, double tol) {
  Pair p = run_both(gpu, cpu, chunks);
  CHECK_MSG(p.gpu.first_row == p.cpu.first_row, "%s: first rows differ", what.c_str());
  const bool ok = judge(what, p.gpu.logits, p.cpu.logits, gpu.config().vocab_size, row_info(chunks), tol);
  CHECK_MSG(ok, "%s: GPU logits differ from the CPU model's beyond %g", what.c_str(), tol);
  return p;
}

// How far the adapters moved the logits (so that a pass above means something): rel difference of `with` to
// `without` over the rows of chunks with a slot.
double lora_effect(const std::vector<float>& with, const std::vector<float>& without, int32_t V,
                   const std::vector<RowInfo>& rows) {
  double num = 0, den = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].slot < 0) continue;
    for (int32_t v = 0; v < V; ++v) {
      const size_t i = r * static_cast<size_t>(V) + static_cast<size_t>(v);
      const double d = static_cast<double>(with[i]) - without[i];
      num += d * d;
      den += static_cast<double>(without[i]) * without[i];
    }
  }
  return den > 0 ? std::sqrt(num / den) : 0;
}

// Adapters of the scenario: slot 0 rank 8 on q, v, o; slot 1 rank 16 on all seven modules; slot 2 rank 4 on the
// fused attn_qkv and down, layers 0 and 2 only.
std::vector<LoraAdapter> scenario_adapters(const ModelConfig& c) {
  std::vector<LoraAdapter> ads;
  ads.push_back(make_adapter(c, 8, {LoraModule::attn_q, LoraModule::attn_v, LoraModule::attn_dense}, all_layers(c),
                             101, 1.0f / 8));
  ads.push_back(make_adapter(c, 16, std::vector<LoraModule>(std::begin(kAll7), std::end(kAll7)), all_layers(c), 202,
                             1.0f / 8));
  ads.push_back(make_adapter(c, 4, {LoraModule::attn_qkv, LoraModule::mlp_4h_to_h}, {0, c.num_layers - 1}, 303,
                             1.0f / 4));
  for (size_t i = 0; i < ads.size(); ++i) check_lora_adapter(ads[i], c, 64, "test adapter " + std::to_string(i));
  return ads;
}

// delta: decode-sized steps compute the deltas beside the product (the default); else the expand adds them after it.
void scenario(const std::string& label, const std::string& config_json, bool delta) {
  const std::string dir = cudatest::write_config(label, config_json);
  auto gpu = load_model(dir, cudatest::options(Device::cuda, "dummy"));
  auto cpu = load_model(dir, cudatest::options(Device::cpu, "dummy"));
  auto* cm = dynamic_cast<cuda::CudaDecoder*>(gpu.get());
  CHECK(cm != nullptr && gpu->supports_lora() && cpu->supports_lora());
  cm->set_lora_delta(delta);
  const ModelConfig& c = gpu->config();
  const int32_t V = c.vocab_size, tpb = 16, per_seq = 32, n_seq = 18;
  gpu->allocate_kv(per_seq * n_seq, tpb);
  cpu->allocate_kv(per_seq * n_seq, tpb);
  std::vector<std::vector<int32_t>> table(n_seq);
  for (int s = 0; s < n_seq; ++s)
    for (int b = 0; b < per_seq; ++b) table[s].push_back(((s * per_seq + b) * 37 + 11) % (per_seq * n_seq));
  auto L = [&](const std::string& what) { return label + "/" + what; };

  // Before any adapter: a prefill and a decode step (a graph) of a sequence of its own.
  const std::vector<SequenceChunk> base_prefill = {chunk(prompt(40, 9, V), 0, table[17], -1, true)};
  const std::vector<SequenceChunk> base_decode = {chunk({3}, 40, table[17], -1)};
  ForwardOutput b0, b1;
  gpu->forward(base_prefill, b0);
  gpu->forward(base_decode, b1);

  const std::vector<LoraAdapter> ads = scenario_adapters(c);
  for (int32_t s = 0; s < 3; ++s) {
    gpu->load_lora(s, ads[static_cast<size_t>(s)]);
    cpu->load_lora(s, ads[static_cast<size_t>(s)]);
  }
  {
    // The same steps with the adapters loaded and no row naming one: bit for bit what the model gave before.
    ForwardOutput a0, a1;
    gpu->forward(base_prefill, a0);
    gpu->forward(base_decode, a1);
    const bool same = a0.logits == b0.logits && a1.logits == b1.logits;
    std::printf("%s: no LoRA rows, adapters loaded: prefill and decode logits bitwise equal to before loading: %s "
                "(max abs diff %.3g, %.3g)\n",
                label.c_str(), same ? "yes" : "NO", cudatest::max_abs_err(a0.logits.data(), b0.logits.data(), a0.logits.size()),
                cudatest::max_abs_err(a1.logits.data(), b1.logits.data(), a1.logits.size()));
    CHECK_MSG(same, "%s: a step without LoRA rows changed when adapters were loaded", label.c_str());
  }

  // Prefill: every slot and none, all_logits on some.
  const int len[6] = {37, 50, 20, 5, 9, 13};
  const int32_t slot[6] = {0, -1, 1, 2, 1, 0};
  std::vector<SequenceChunk> pre;
  for (int i = 0; i < 6; ++i) pre.push_back(chunk(prompt(len[i], i + 1, V), 0, table[i], slot[i], i < 3));
  Pair p = compare(*gpu, *cpu, pre, L("prefill-mixed"), kTol);
  {
    // The same prompts without adapters (rewriting the same K/V positions, later rewritten again below).
    std::vector<SequenceChunk> plain = pre;
    for (auto& ch : plain) ch.lora_slot = -1;
    ForwardOutput none;
    gpu->forward(plain, none);
    const double eff = lora_effect(p.gpu.logits, none.logits, V, row_info(pre));
    std::printf("%s: the adapters move the LoRA rows' logits by %.3g (rel)\n", L("prefill-mixed").c_str(), eff);
    CHECK_MSG(eff > 10 * kTol, "%s: the adapters barely change the logits (%g): the test would not see a bug",
              label.c_str(), eff);
    run_both(*gpu, *cpu, pre);  // the K/V of the adapters' run again, on both
  }

  // Decode: one row per chunk (a CUDA graph), then the same step with plain launches.
  std::vector<SequenceChunk> dec;
  for (int i = 0; i < 6; ++i) dec.push_back(chunk({(i * 31 + 7) % V}, len[i], table[i], slot[i]));
  Pair d = compare(*gpu, *cpu, dec, L("decode-mixed (graph)"), 2 * kTol);
  cm->set_use_graphs(false);
  ForwardOutput plain;
  gpu->forward(dec, plain);  // same positions: rewrites the same K/V
  cm->set_use_graphs(true);
  {
    const double e = plain.logits.size() == d.gpu.logits.size()
                         ? rel_err(plain.logits.data(), d.gpu.logits.data(), plain.logits.size())
                         : 1;
    std::printf("%s: CUDA graph vs plain launches rel err %.3g\n", L("decode-mixed").c_str(), e);
    CHECK_MSG(e < 1e-5, "%s: decode with LoRA differs with and without the CUDA graph (%g)", label.c_str(), e);
  }

  // A step mixing decode rows (slots 0, 2, none) with a context chunk (slot 1, every row) and a new prompt (slot 2).
  std::vector<SequenceChunk> mixed = {
      chunk({11}, len[0] + 1, table[0], 0),
      chunk(prompt(16, 7, V), len[2] + 1, table[2], 1, true),
      chunk({12}, len[3] + 1, table[3], 2),
      chunk(prompt(24, 8, V), 0, table[6], 2),
      chunk({13}, len[1] + 1, table[1], -1),
  };
  compare(*gpu, *cpu, mixed, L("mixed-step"), kTol);

  // Ten sequences: a prefill all on slot 1, then decode batches of 10 rows (two tiles of slot 1; rows beyond the
  // decode GEMV's 8: cuBLAS and the norm kernel), then the same 10 with slots round-robin 0, 1, 2, none.
  std::vector<SequenceChunk> ten;
  for (int s = 0; s < 10; ++s) ten.push_back(chunk(prompt(8 + s, 20 + s, V), 0, table[7 + s], 1));
  compare(*gpu, *cpu, ten, L("prefill-10-slot-1"), kTol);
  for (int step = 0; step < 2; ++step) {
    std::vector<SequenceChunk> b;
    for (int s = 0; s < 10; ++s)
      b.push_back(chunk({(s * 13 + step) % V}, 8 + s + step, table[7 + s], step == 0 ? 1 : (s % 4 == 3 ? -1 : s % 4)));
    compare(*gpu, *cpu, b, L(step == 0 ? "decode-10-slot-1 (graph)" : "decode-10-round-robin (graph)"), 2 * kTol);
  }
  // Eight of them (the decode GEMV's widest, fused norm) round-robin.
  {
    std::vector<SequenceChunk> b;
    for (int s = 0; s < 8; ++s) b.push_back(chunk({(s * 17) % V}, 10 + s, table[7 + s], s % 4 == 3 ? -1 : s % 4));
    compare(*gpu, *cpu, b, L("decode-8-round-robin (graph)"), 2 * kTol);
  }

  // Reload slot 0 with another adapter (rank 16 on k, gate and up): the same step before and after.
  const std::vector<SequenceChunk> z = {chunk({21}, len[0] + 2, table[0], 0), chunk({22}, len[4], table[4], 1),
                                        chunk({23}, len[1] + 2, table[1], -1)};
  Pair before = compare(*gpu, *cpu, z, L("before-reload (graph)"), 2 * kTol);
  const LoraAdapter other = make_adapter(c, 16, {LoraModule::attn_k, LoraModule::mlp_gate, LoraModule::mlp_h_to_4h},
                                         all_layers(c), 404, 1.0f / 8);
  check_lora_adapter(other, c, 64, "reload adapter");
  gpu->load_lora(0, other);
  cpu->load_lora(0, other);
  Pair after = compare(*gpu, *cpu, z, L("after-reload (graph)"), 2 * kTol);
  {
    const size_t v = static_cast<size_t>(V);
    const double moved = rel_err(after.gpu.logits.data(), before.gpu.logits.data(), v);
    const double rest = rel_err(after.gpu.logits.data() + v, before.gpu.logits.data() + v, 2 * v);
    std::printf("%s: slot 0's row moved by %.3g (rel), the other slots' rows by %.3g\n", L("reload").c_str(), moved, rest);
    CHECK_MSG(moved > 10 * kTol, "%s: reloading slot 0 did not change its row (%g)", label.c_str(), moved);
    CHECK_MSG(rest < 1e-6, "%s: reloading slot 0 changed other slots' rows (%g)", label.c_str(), rest);
  }

  // Slot 2 unloaded: a chunk naming it runs as the base model, as on the CPU.
  gpu->unload_lora(2);
  cpu->unload_lora(2);
  compare(*gpu, *cpu, {chunk({31}, len[3] + 2, table[3], 2), chunk({32}, len[0] + 3, table[0], 0)},
          L("slot-2-unloaded (graph)"), 2 * kTol);
}

// More slots in one step than a graph's lora_add has tile blocks (lora_grid_tiles): 12 adapters, 12 decode rows
// each of its own slot (12 tiles against a grid of 10, so blocks 0 and 1 serve two tiles each), then 20 rows over
// them (slot 0 has 10: a tile of 8 and one of 2; 12 tiles against a grid of 11), against the CPU model; the
// prefill before them (plain launches, one block per tile) too.
void many_slots() {
  const std::string dir = cudatest::write_config("lora-many", kLlamaGqa);
  auto gpu = load_model(dir, cudatest::options(Device::cuda, "dummy"));
  auto cpu = load_model(dir, cudatest::options(Device::cpu, "dummy"));
  const ModelConfig& c = gpu->config();
  const int32_t V = c.vocab_size, n_slots = 12, n_seq = 20, per_seq = 4, tpb = 16;
  gpu->allocate_kv(per_seq * n_seq, tpb);
  cpu->allocate_kv(per_seq * n_seq, tpb);
  for (int32_t s = 0; s < n_slots; ++s) {
    // Ranks 8 and 16 alternating, every module on even slots, q / v / down on odd ones.
    const LoraAdapter a =
        s % 2 == 0 ? make_adapter(c, 16, std::vector<LoraModule>(std::begin(kAll7), std::end(kAll7)), all_layers(c),
                                  600 + s, 1.0f / 8)
                   : make_adapter(c, 8, {LoraModule::attn_q, LoraModule::attn_v, LoraModule::mlp_4h_to_h},
                                  all_layers(c), 600 + s, 1.0f / 8);
    gpu->load_lora(s, a);
    cpu->load_lora(s, a);
  }
  CHECK(cuda::lora_grid_tiles(12, 16) == 10 && cuda::lora_max_tiles(12, 16) == 13);
  std::vector<std::vector<int32_t>> table(n_seq);
  for (int s = 0; s < n_seq; ++s)
    for (int b = 0; b < per_seq; ++b) table[s].push_back(s * per_seq + b);
  // Sequence s runs slot s % 12 (sequences 12..19: slots 0..7 again).
  std::vector<SequenceChunk> pre;
  for (int s = 0; s < n_seq; ++s) pre.push_back(chunk(prompt(6 + s % 5, 60 + s, V), 0, table[s], s % n_slots));
  compare(*gpu, *cpu, pre, "many-slots/prefill-20", kTol);
  std::vector<SequenceChunk> twelve;
  for (int s = 0; s < n_slots; ++s) twelve.push_back(chunk({(s * 29 + 3) % V}, 6 + s % 5, table[s], s));
  compare(*gpu, *cpu, twelve, "many-slots/decode-12-slots (graph)", 2 * kTol);
  std::vector<SequenceChunk> twenty;
  for (int s = 0; s < n_seq; ++s)
    twenty.push_back(chunk({(s * 31 + 5) % V}, 6 + s % 5 + (s < n_slots ? 1 : 0), table[s], s < 9 ? 0 : s % n_slots));
  compare(*gpu, *cpu, twenty, "many-slots/decode-20-rows (graph)", 2 * kTol);
}

// A step of more than 256 tokens (stack: the stacked cuBLAS products, lora-kernels.h's lora_stack; else the
// tensor-core kernels, *_wide): prompts of slots 0, 1, 2 and none in one 380-token chunk, then a decode step of
// them, against the CPU model. Ranks 16, 8 and 24 (a second 16-rank MMA row half empty; three rank bounds stacked);
// on the Llama, an intermediate size of 776 puts the up projection's gate | up boundary inside a 16-column group
// (the kernels' fp32 path).
void wide_steps(const std::string& label, const std::string& config_json, bool stack) {
  const std::string dir = cudatest::write_config(label, config_json);
  auto gpu = load_model(dir, cudatest::options(Device::cuda, "dummy"));
  auto cpu = load_model(dir, cudatest::options(Device::cpu, "dummy"));
  auto* cm = dynamic_cast<cuda::CudaDecoder*>(gpu.get());
  CHECK(cm != nullptr);
  cm->set_lora_stack(stack);
  const ModelConfig& c = gpu->config();
  const int32_t V = c.vocab_size, tpb = 16, per_seq = 8, n_seq = 4;
  gpu->allocate_kv(per_seq * n_seq, tpb);
  cpu->allocate_kv(per_seq * n_seq, tpb);
  const std::vector<int32_t> layers = all_layers(c);
  const std::vector<LoraModule> all7(std::begin(kAll7), std::end(kAll7));
  const LoraAdapter ads[3] = {make_adapter(c, 16, all7, layers, 701, 1.0f / 8),
                              make_adapter(c, 8, all7, layers, 702, 1.0f / 8),
                              make_adapter(c, 24, {LoraModule::attn_q, LoraModule::attn_v, LoraModule::mlp_h_to_4h,
                                                   LoraModule::mlp_4h_to_h},
                                           layers, 703, 1.0f / 8)};
  for (int32_t s = 0; s < 3; ++s) {
    gpu->load_lora(s, ads[s]);
    cpu->load_lora(s, ads[s]);
  }
  std::vector<std::vector<int32_t>> table(n_seq);
  for (int s = 0; s < n_seq; ++s)
    for (int b = 0; b < per_seq; ++b) table[s].push_back(s * per_seq + b);
  const int len[n_seq] = {101, 90, 97, 92};
  const int32_t slot[n_seq] = {0, 1, 2, -1};
  std::vector<SequenceChunk> pre, dec;
  for (int s = 0; s < n_seq; ++s) {
    pre.push_back(chunk(prompt(len[s], 80 + s, V), 0, table[s], slot[s], s < 2));
    dec.push_back(chunk({(s * 41 + 9) % V}, len[s], table[s], slot[s]));
  }
  Pair p = compare(*gpu, *cpu, pre, label + "/prefill-380-tokens", kTol);
  {
    std::vector<SequenceChunk> plain = pre;
    for (auto& ch : plain) ch.lora_slot = -1;
    ForwardOutput none;
    gpu->forward(plain, none);
    const double eff = lora_effect(p.gpu.logits, none.logits, V, row_info(pre));
    std::printf("%s: the adapters move the LoRA rows' logits by %.3g (rel)\n", (label + "/prefill-380-tokens").c_str(),
                eff);
    CHECK_MSG(eff > 10 * kTol, "%s: the adapters barely change the logits (%g)", label.c_str(), eff);
    run_both(*gpu, *cpu, pre);  // the adapters' K/V again, on both
  }
  compare(*gpu, *cpu, dec, label + "/decode-after-wide (graph)", 2 * kTol);
}

// --quantization fp8 on the GPU (e4m3 products, LoRA in bf16 beside them) against the CPU model's bf16 weights:
// the logits differ by the quantization, so the deltas are judged: (with adapters - without) on each.
void fp8_deltas() {
  const std::string dir = cudatest::write_config("lora-fp8", kLlamaGqa);
  LoadOptions go = cudatest::options(Device::cuda, "dummy");
  go.quantization = "fp8";
  auto gpu = load_model(dir, go);
  auto cpu = load_model(dir, cudatest::options(Device::cpu, "dummy"));
  auto* cm = dynamic_cast<cuda::CudaDecoder*>(gpu.get());
  CHECK(cm != nullptr && cm->fp8());
  const ModelConfig& c = gpu->config();
  const int32_t V = c.vocab_size;
  gpu->allocate_kv(64, 16);
  cpu->allocate_kv(64, 16);
  std::vector<std::vector<int32_t>> table(4);
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < 16; ++b) table[s].push_back(s * 16 + b);
  const std::vector<LoraAdapter> ads = scenario_adapters(c);
  for (int32_t s = 0; s < 3; ++s) {
    gpu->load_lora(s, ads[static_cast<size_t>(s)]);
    cpu->load_lora(s, ads[static_cast<size_t>(s)]);
  }
  // Prefill (more rows than the FP8 GEMV takes: quantized activations, cuBLASLt), then a decode batch (the FP8
  // GEMV with the norm fused), first with adapters, then the same steps without.
  auto steps = [&](bool with) {
    const int32_t slot[4] = {0, 1, 2, -1};
    std::vector<SequenceChunk> pre, dec;
    for (int s = 0; s < 4; ++s) {
      pre.push_back(chunk(prompt(30 + s, s + 40, V), 0, table[s], with ? slot[s] : -1, true));
      dec.push_back(chunk({(s * 7 + 1) % V}, 30 + s, table[s], with ? slot[s] : -1));
    }
    std::vector<float> g, h;
    for (const auto* batch : {&pre, &dec}) {
      Pair p = run_both(*gpu, *cpu, *batch);
      g.insert(g.end(), p.gpu.logits.begin(), p.gpu.logits.end());
      h.insert(h.end(), p.cpu.logits.begin(), p.cpu.logits.end());
    }
    return std::make_pair(g, h);
  };
  const auto with = steps(true), without = steps(false);
  CHECK(with.first.size() == with.second.size() && without.first.size() == with.first.size());
  std::vector<float> dg(with.first.size()), dc(dg.size());
  for (size_t i = 0; i < dg.size(); ++i) {
    dg[i] = with.first[i] - without.first[i];
    dc[i] = with.second[i] - without.second[i];
  }
  const double e_base = rel_err(without.first.data(), without.second.data(), dg.size());
  const double e_delta = rel_err(dg.data(), dc.data(), dg.size());
  const double size = rel_err(with.second.data(), without.second.data(), dg.size());
  std::printf("fp8: base logits vs the CPU's bf16 weights rel err %.3g; the adapters' deltas (%.3g of the logits) "
              "GPU vs CPU rel err %.3g (max abs %.3g)\n",
              e_base, size, e_delta, cudatest::max_abs_err(dg.data(), dc.data(), dg.size()));
  // The quantization moves what the deltas pass through; a delta left out would be off by 1.
  CHECK_MSG(e_delta < 0.3, "fp8: LoRA deltas differ from the CPU model's by %g", e_delta);
}

}  // namespace

TEST_MAIN({
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  }
  std::printf("%s, %d GPU(s)\n", cuda_backend_status(), cuda_device_count());
  for (bool delta : {true, false})
    for (auto [name, cfg] : {std::pair{"llama-gqa", kLlamaGqa}, {"gemma2", kGemma2}}) {
      const std::string label = std::string(name) + (delta ? "" : "-expand-after");
      try {
        scenario(label, cfg, delta);
      } catch (const std::exception& e) {
        CHECK_MSG(false, "%s: %s", label.c_str(), e.what());
      }
    }
  {
    std::string wide_llama = kLlamaGqa;
    const std::string from = "\"intermediate_size\": 768";
    wide_llama.replace(wide_llama.find(from), from.size(), "\"intermediate_size\": 776");
    for (bool stack : {true, false})
      for (auto [name, cfg] : {std::pair{std::string("wide-llama-776"), wide_llama}, {"wide-gemma2", kGemma2}}) {
        const std::string label = name + (stack ? "" : "-kernels");
        try {
          wide_steps(label, cfg, stack);
        } catch (const std::exception& e) {
          CHECK_MSG(false, "%s: %s", label.c_str(), e.what());
        }
      }
  }
  try {
    many_slots();
  } catch (const std::exception& e) {
    CHECK_MSG(false, "many slots: %s", e.what());
  }
  try {
    fp8_deltas();
  } catch (const std::exception& e) {
    CHECK_MSG(false, "fp8: %s", e.what());
  }
})
