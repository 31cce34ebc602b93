#include "sampling/logits-processors.h"

#include <cmath>
#include <limits>

namespace engine {
namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();

// The last `n` tokens of `tokens` equal word[0 .. n).
bool tail_matches(const TokenIds& tokens, const TokenIds& word, size_t n) {
  if (tokens.size() < n) return false;
  const size_t start = tokens.size() - n;
  for (size_t i = 0; i < n; ++i)
    if (tokens[start + i] != word[i]) return false;
  return true;
}

}  // namespace

void LogitsProcessors::apply_penalties(float* row, int32_t vocab, const SamplingContext& ctx) {
  const SamplingConfig& cfg = *ctx.config;
  const bool repetition = cfg.repetition_penalty != 1.0f;
  const bool presence = cfg.presence_penalty != 0.0f;
  const bool frequency = cfg.frequency_penalty != 0.0f;
  if ((!repetition && !presence && !frequency) || ctx.tokens == nullptr) return;

  if (static_cast<int32_t>(output_count_.size()) < vocab) {
    output_count_.assign(static_cast<size_t>(vocab), 0);
    in_sequence_.assign(static_cast<size_t>(vocab), 0);
  }
  const TokenIds& tokens = *ctx.tokens;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab) continue;  // validated at enqueue; a guard, not a feature
    if (!in_sequence_[t]) {
      in_sequence_[t] = 1;
      touched_.push_back(t);
    }
    if (static_cast<int32_t>(i) >= ctx.prompt_len) ++output_count_[t];
  }
  for (int32_t t : touched_) {
    float x = row[t];
    // TRT-LLM's and HF's rule: dividing a negative logit would raise it, so negative ones are multiplied.
    if (repetition) x = x > 0 ? x / cfg.repetition_penalty : x * cfg.repetition_penalty;
    const int32_t count = output_count_[t];
    if (count > 0) {
      if (presence) x -= cfg.presence_penalty;
      if (frequency) x -= cfg.frequency_penalty * static_cast<float>(count);
    }
    row[t] = x;
    in_sequence_[t] = 0;
    output_count_[t] = 0;
  }
  touched_.clear();
}

void LogitsProcessors::apply(float* row, int32_t vocab, const SamplingContext& ctx) {
  for (int32_t t = 0; t < vocab; ++t)
    if (std::isnan(row[t])) row[t] = kBanned;

  if (ctx.embedding_bias != nullptr && static_cast<int32_t>(ctx.embedding_bias->size()) == vocab) {
    const float* bias = ctx.embedding_bias->data();
    for (int32_t t = 0; t < vocab; ++t) row[t] += bias[t];
  }
  if (ctx.config != nullptr) {
    apply_penalties(row, vocab, ctx);
    if (ctx.end_id >= 0 && ctx.end_id < vocab && static_cast<int64_t>(ctx.step) < ctx.config->min_tokens)
      row[ctx.end_id] = kBanned;
  }
  if (ctx.bad_words != nullptr && ctx.tokens != nullptr) {
    for (const TokenIds& word : *ctx.bad_words) {
      if (word.empty()) continue;
      const int32_t last = word.back();
      if (last < 0 || last >= vocab) continue;
      if (word.size() == 1 || tail_matches(*ctx.tokens, word, word.size() - 1)) row[last] = kBanned;
    }
  }
  if (ctx.allowed != nullptr) {
    const std::vector<uint64_t>& allowed = *ctx.allowed;
    for (int32_t t = 0; t < vocab; ++t)
      if (!((allowed[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1u)) row[t] = kBanned;
  }
}

}  // namespace engine
