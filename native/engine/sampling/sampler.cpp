#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace engine {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Higher logit first; on equal logits the lower token id wins (stable, documented tie-break).
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  if (a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

}  // namespace

double counter_uniform(uint64_t seed, uint64_t step) {
  const uint64_t h = splitmix64(splitmix64(seed) ^ splitmix64(step ^ 0xD1B54A32D192ED03ull));
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);  // 53 random bits -> [0, 1)
}

void Sampler::processed_log_probs(const float* logits, int32_t vocab, const SamplingContext& ctx,
                                  std::vector<float>& out) {
  out.assign(logits, logits + vocab);
  processors_.apply(out.data(), vocab, ctx);
  const float t = ctx.config != nullptr ? ctx.config->temperature : 1.0f;
  if (t > 0 && t != 1.0f)
    for (float& x : out) x /= t;
  float max = -std::numeric_limits<float>::infinity();
  for (float x : out) max = std::max(max, x);
  if (max == -std::numeric_limits<float>::infinity()) return;  // every token banned: all stay -inf
  double sum = 0;
  for (float x : out) sum += std::exp(static_cast<double>(x) - max);
  const float log_z = max + static_cast<float>(std::log(sum));
  for (float& x : out) x -= log_z;
}

SampledToken Sampler::sample(const float* logits, int32_t vocab, const SamplingContext& ctx) {
  const SamplingConfig& cfg = *ctx.config;
  row_.assign(logits, logits + vocab);
  processors_.apply(row_.data(), vocab, ctx);

  const bool greedy = is_greedy(cfg);
  if (greedy) {
    int32_t best = 0;
    for (int32_t t = 1; t < vocab; ++t)
      if (row_[t] > row_[best]) best = t;  // strict '>' keeps the lowest id among equal maxima
    const float max = row_[best];
    if (max == -std::numeric_limits<float>::infinity()) return {best, max};  // every token banned
    double sum = 0;
    for (int32_t t = 0; t < vocab; ++t) sum += std::exp(static_cast<double>(row_[t]) - max);
    return {best, static_cast<float>(-std::log(sum))};
  }

  // Temperature, then softmax over the whole row (its normaliser is needed for top-p's mass either way).
  const float inv_t = 1.0f / cfg.temperature;
  candidates_.resize(static_cast<size_t>(vocab));
  float max = -std::numeric_limits<float>::infinity();
  for (int32_t t = 0; t < vocab; ++t) {
    candidates_[t] = {row_[t] * inv_t, t};
    max = std::max(max, candidates_[t].first);
  }
  if (max == -std::numeric_limits<float>::infinity()) return {0, 0.0f};  // every token banned: nothing to sample

  // Keep the top_k best (all when top_k is 0 or >= vocab). With top_p < 1 as well, only the best-first prefix up
  // to mass top_p matters: find it by sorting a growing head of the row instead of the whole vocabulary (a full
  // sort of 150k entries per token would dominate decode time).
  const size_t limit = (cfg.top_k > 0 && cfg.top_k < vocab) ? static_cast<size_t>(cfg.top_k) : static_cast<size_t>(vocab);
  const float top_p = cfg.top_p.value_or(1.0f);
  const bool nucleus = top_p < 1.0f;
  double total = 0;  // normaliser of the distribution top-p measures mass against
  size_t head = static_cast<size_t>(vocab);
  if (limit < candidates_.size()) {
    head = limit;
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(head), candidates_.end(),
                      better);
    for (size_t i = 0; i < head; ++i) total += std::exp(static_cast<double>(candidates_[i].first) - max);
  } else {
    for (const auto& c : candidates_) total += std::exp(static_cast<double>(c.first) - max);
    if (nucleus) {
      for (head = std::min(head, size_t{64});; head = std::min(candidates_.size(), head * 4)) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(head),
                          candidates_.end(), better);
        if (head == candidates_.size()) break;
        double mass = 0;
        for (size_t i = 0; i < head; ++i) mass += std::exp(static_cast<double>(candidates_[i].first) - max);
        if (mass >= top_p * total) break;
      }
    }
  }
  candidates_.resize(head);
  // (With neither limit the row stays in token order: the draw walks the cumulative sums in any order.)

  probs_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) probs_[i] = std::exp(static_cast<double>(candidates_[i].first) - max) / total;

  // Nucleus: the smallest best-first prefix whose mass reaches top_p (at least one token), renormalised.
  size_t n = probs_.size();
  if (nucleus) {
    double cum = 0;
    for (size_t i = 0; i < probs_.size(); ++i) {
      cum += probs_[i];
      if (cum >= top_p) { n = i + 1; break; }
    }
    double kept = 0;
    for (size_t i = 0; i < n; ++i) kept += probs_[i];
    for (size_t i = 0; i < n; ++i) probs_[i] /= kept;
  }

  const double u = counter_uniform(cfg.seed.value_or(0), ctx.step);
  double cum = 0;
  size_t chosen = n - 1;  // rounding can leave u just above the last cumulative sum
  for (size_t i = 0; i < n; ++i) {
    if (probs_[i] <= 0) continue;
    cum += probs_[i];
    if (u < cum) { chosen = i; break; }
  }
  while (chosen > 0 && probs_[chosen] <= 0) --chosen;  // never return a zero-probability token
  return {candidates_[chosen].second, static_cast<float>(std::log(probs_[chosen]))};
}

}  // namespace engine
