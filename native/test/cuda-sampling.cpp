// Sampling on the GPU (DeviceSampler -> kernels.h's sample_rows) against the host sampler (sampler.h) on the very
// same logits rows: peaked, flat, tied (values on a coarse grid), and with -inf / NaN entries; vocabularies of 1,000
// and 128,256; temperature alone, top-k, top-p, both, penalties (repetition, presence, frequency) and greedy with
// penalties, and under a guided-decoding token mask; 40 draws (steps) per row and configuration. Both sides draw counter_uniform(seed, step), so the tokens
// must agree except where the two sides' different summation orders put the draw on a boundary (allowed: 0.5%).
// Also the rows of one chunk drawn into ForwardOutput::row_samples (a speculative step's check) against the same rows
// drawn one chunk each.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "cuda/cuda-backend.h"
#include "cuda/device-sampler.h"
#include "sampling/sampler.h"

using namespace engine;

namespace {

struct Config {
  const char* label;
  float temperature;
  int32_t top_k;
  std::optional<float> top_p;
  float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  bool masked = false;  // guided decoding: only the tokens of guide_mask() may be drawn
};

// A guide's token mask: about one token in 40, spread over the vocabulary, and the last id.
std::vector<uint64_t> guide_mask(int32_t vocab) {
  std::vector<uint64_t> mask(static_cast<size_t>(vocab + 63) / 64, 0);
  for (int32_t i = 0; i < vocab; ++i)
    if ((static_cast<uint32_t>(i) * 2654435761u >> 9) % 40 == 0 || i == vocab - 1)
      mask[static_cast<size_t>(i) >> 6] |= uint64_t{1} << (i & 63);
  return mask;
}

std::vector<float> make_row(int kind, int32_t vocab, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = normal(rng);
  switch (kind) {
    case 0: for (float& x : row) x *= 4.0f; break;  // peaked: a few tokens hold the mass
    case 1: for (float& x : row) x *= 0.5f; break;  // flat: top-p keeps thousands
    case 2: for (float& x : row) x = std::round(x * 2.0f) / 2.0f; break;  // ties everywhere
    default:  // banned and broken entries
      for (int32_t i = 0; i < vocab; i += 7) row[static_cast<size_t>(i)] = -INFINITY;
      row[3] = NAN;
      for (float& x : row) x *= 3.0f;
  }
  return row;
}

void compare(int32_t vocab) {
  const std::vector<Config> configs = {
      // top_k >= vocab: no limit, yet not greedy (top_k 0 without top_p is greedy): the draw walks token order.
      {"temperature 1.3 (top-k vocab)", 1.3f, vocab, std::nullopt},
      {"top-k 50, t 0.7", 0.7f, 50, std::nullopt},
      {"top-p 0.9", 1.0f, 0, 0.9f},
      {"top-k 40 + top-p 0.8", 1.0f, 40, 0.8f},
      {"top-p 0.5 + penalties", 0.8f, 0, 0.5f, 1.3f, 0.4f, 0.25f},
      {"t 1 + repetition (top-k vocab)", 1.0f, vocab, std::nullopt, 1.5f},
      {"greedy + penalties", 0.0f, 0, std::nullopt, 1.2f, 0.5f, 0.5f},
      {"top-k 1000 + top-p 0.99", 1.2f, 1000, 0.99f},
      {"guided: top-p 0.9 + penalties", 0.9f, 0, 0.9f, 1.3f, 0.2f, 0.1f, true},
      {"guided: temperature 1 (top-k vocab)", 1.0f, vocab, std::nullopt, 1.0f, 0.0f, 0.0f, true},
      {"guided: greedy", 0.0f, 0, std::nullopt, 1.0f, 0.0f, 0.0f, true},
  };
  const std::vector<uint64_t> mask = guide_mask(vocab);
  constexpr int kKinds = 4, kSteps = 40;
  std::mt19937 rng(42 + vocab);
  std::uniform_int_distribution<int32_t> any_token(0, vocab - 1);
  TokenIds tokens;  // 150 prompt + 60 output tokens, with repeats so the counts matter
  for (int i = 0; i < 210; ++i) tokens.push_back(i % 3 == 0 && i > 0 ? tokens[static_cast<size_t>(i / 2)] : any_token(rng));
  const int32_t prompt_len = 150;

  std::vector<std::vector<float>> rows;
  for (int k = 0; k < kKinds; ++k) rows.push_back(make_row(k, vocab, rng));

  // Every (row, config, step) is one device row: the kernel rewrites the rows it samples.
  const size_t n = rows.size() * configs.size() * kSteps;
  std::vector<float> all(n * static_cast<size_t>(vocab));
  std::vector<SamplingConfig> cfgs;
  for (const Config& c : configs) {
    SamplingConfig sc;
    sc.temperature = c.temperature;
    sc.top_k = c.top_k;
    sc.top_p = c.top_p;
    sc.seed = 777;
    sc.repetition_penalty = c.repetition;
    sc.presence_penalty = c.presence;
    sc.frequency_penalty = c.frequency;
    cfgs.push_back(sc);
  }
  cuda::DeviceSampler sampler;
  std::vector<DeviceSampling> specs;  // the sampler reads them (their masks) again in enqueue()
  specs.reserve(n);
  std::vector<SampledToken> host(n);
  Sampler hs;
  size_t at = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < configs.size(); ++c)
      for (int s = 0; s < kSteps; ++s, ++at) {
        std::copy(rows[r].begin(), rows[r].end(), all.begin() + static_cast<std::ptrdiff_t>(at * vocab));
        SamplingContext ctx;
        ctx.config = &cfgs[c];
        ctx.step = static_cast<uint64_t>(s);
        ctx.tokens = &tokens;
        ctx.prompt_len = prompt_len;
        if (configs[c].masked) ctx.allowed = &mask;
        host[at] = hs.sample(rows[r].data(), vocab, ctx);
        DeviceSampling& d = specs.emplace_back();
        const SamplingConfig& sc = cfgs[c];
        d.greedy = is_greedy(sc);
        d.temperature = sc.temperature;
        d.top_k = sc.top_k;
        d.top_p = sc.top_p.value_or(1.0f);
        d.seed = *sc.seed;
        d.step = static_cast<uint64_t>(s);
        d.repetition_penalty = sc.repetition_penalty;
        d.presence_penalty = sc.presence_penalty;
        d.frequency_penalty = sc.frequency_penalty;
        std::map<int32_t, int32_t> counts;
        for (size_t i = 0; i < tokens.size(); ++i) counts[tokens[i]] += static_cast<int32_t>(i) >= prompt_len ? 1 : 0;
        d.penalty_tokens.assign(counts.begin(), counts.end());
        if (configs[c].masked) d.allowed = mask;
        sampler.add(static_cast<int32_t>(at), static_cast<int32_t>(at), d);
      }
  float* dev = nullptr;
  cudaMalloc(&dev, all.size() * sizeof(float));
  cudaMemcpy(dev, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  ForwardOutput out;
  out.sampled.resize(n);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, stream);
  sampler.enqueue(dev, vocab, stream);
  cudaEventRecord(e1, stream);
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  sampler.finish(out);
  cudaFree(dev);
  cudaStreamDestroy(stream);

  at = 0;
  int total_equal = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < configs.size(); ++c) {
      int equal = 0, lp_ok = 0;
      std::set<int32_t> distinct;
      for (int s = 0; s < kSteps; ++s, ++at) {
        const DeviceSample& g = out.sampled[at];
        distinct.insert(g.token);
        if (configs[c].masked)
          CHECK_MSG((mask[static_cast<size_t>(g.token) >> 6] >> (g.token & 63)) & 1u,
                    "vocab %d row %zu %s: token %d is outside the guide's mask", vocab, r, configs[c].label, g.token);
        if (g.token != host[at].token) continue;
        ++equal;
        const double a = g.log_prob, b = host[at].log_prob;
        if ((std::isinf(a) && a == b) || std::fabs(a - b) <= 1e-3 + 1e-3 * std::fabs(b)) ++lp_ok;
      }
      total_equal += equal;
      std::printf("vocab %d, row kind %zu, %-30s: %2d/%d tokens equal to the host sampler, %2d log-probs within "
                  "1e-3, %zu distinct tokens\n",
                  vocab, r, configs[c].label, equal, kSteps, lp_ok, distinct.size());
      CHECK_MSG(equal >= kSteps - 1, "vocab %d row %zu %s: %d/%d", vocab, r, configs[c].label, equal, kSteps);
      CHECK_MSG(lp_ok == equal, "vocab %d row %zu %s: log-probs %d/%d", vocab, r, configs[c].label, lp_ok, equal);
      // A sampling configuration on a non-peaked row draws more than one token over 40 steps.
      if (configs[c].temperature > 0 && r == 1) CHECK_MSG(distinct.size() > 1, "%s", configs[c].label);
    }
  std::printf("vocab %d: %d/%zu draws equal; %zu rows sampled on the GPU in %.2f ms\n", vocab, total_equal, n, n, ms);
  CHECK(total_equal >= static_cast<int>(n - n / 200));
}

// A speculative step's check of a sampled request: the rows of one chunk, row j drawn as step + j into
// ForwardOutput::row_samples, give exactly what the same rows give drawn one chunk each (the same kernel on the same
// rows: bitwise), and the chunk's `sampled` entry is its last row's.
void row_samples_check(int32_t vocab) {
  constexpr int kRows = 6;
  std::mt19937 rng(7 + vocab);
  std::vector<float> all;
  for (int j = 0; j < kRows; ++j) {
    const std::vector<float> row = make_row(j % 3, vocab, rng);
    all.insert(all.end(), row.begin(), row.end());
  }
  DeviceSampling d;
  d.temperature = 0.8f;
  d.top_p = 0.95f;
  d.seed = 4242;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  float* dev = nullptr;
  cudaMalloc(&dev, all.size() * sizeof(float));
  auto draw = [&](bool one_chunk, ForwardOutput& out) {
    cudaMemcpy(dev, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice);  // (the kernel rewrites rows)
    cuda::DeviceSampler sampler;
    out.sampled.assign(kRows, DeviceSample{-1, 0});
    out.row_samples.assign(kRows, DeviceSample{-1, 0});
    for (int j = 0; j < kRows; ++j) {
      DeviceSampling dj = d;
      dj.step = 5 + static_cast<uint64_t>(j);
      if (one_chunk) sampler.add(j, 0, dj, j);
      else sampler.add(j, j, dj);
    }
    sampler.enqueue(dev, vocab, stream);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    sampler.finish(out);
  };
  ForwardOutput rows, chunks;
  draw(true, rows);
  draw(false, chunks);
  int equal = 0;
  for (int j = 0; j < kRows; ++j)
    equal += rows.row_samples[j].token == chunks.sampled[j].token && rows.row_samples[j].log_prob == chunks.sampled[j].log_prob;
  std::printf("vocab %d: %d/%d rows of one chunk drawn as step + j equal to the same rows drawn one chunk each\n", vocab,
              equal, kRows);
  CHECK_MSG(equal == kRows, "vocab %d: %d/%d", vocab, equal, kRows);
  CHECK(rows.sampled[0].token == rows.row_samples[kRows - 1].token);
  cudaFree(dev);
  cudaStreamDestroy(stream);
}

}  // namespace

TEST_MAIN({
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  }
  for (int32_t vocab : {1000, 128256}) {
    try {
      compare(vocab);
      row_samples_check(vocab);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "vocab %d: %s", vocab, e.what());
    }
  }
})
