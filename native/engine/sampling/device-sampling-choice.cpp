#include "sampling/device-sampling-choice.h"

#include <unordered_map>

namespace engine {
namespace {

// True when the device can draw what the host sampler would: every logits processor in use is a penalty.
bool device_can_sample(const Sequence& s) {
  const Request& r = s.request;
  const bool min_tokens_active = r.end_id >= 0 && s.num_generated() < r.sampling.min_tokens;
  return !s.is_beam_search() && !r.output.return_generation_logits && r.embedding_bias.empty() &&
         r.bad_words.empty() && !min_tokens_active && !s.budget_redraw;
}

bool has_penalty(const SamplingConfig& c) {
  return c.repetition_penalty != 1.0f || c.presence_penalty != 0.0f || c.frequency_penalty != 0.0f;
}

DeviceSampling device_sampling_of(const Sequence& s) {
  const SamplingConfig& c = s.request.sampling;
  DeviceSampling d;
  d.greedy = is_greedy(c);
  d.temperature = c.temperature;
  d.top_k = c.top_k;
  d.top_p = c.top_p.value_or(1.0f);
  d.seed = c.seed.value_or(0);
  d.step = static_cast<uint64_t>(s.num_generated());
  d.repetition_penalty = c.repetition_penalty;
  d.presence_penalty = c.presence_penalty;
  d.frequency_penalty = c.frequency_penalty;
  d.guided = s.matcher != nullptr;
  if (has_penalty(c)) {
    std::unordered_map<int32_t, int32_t> output_count;  // distinct tokens, with their count in the output
    output_count.reserve(s.tokens.size());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      int32_t& n = output_count[s.tokens[i]];
      if (static_cast<int32_t>(i) >= s.prompt_len) ++n;
    }
    d.penalty_tokens.assign(output_count.begin(), output_count.end());
  }
  return d;
}

}  // namespace

void choose_device_sampling(const Sequence& seq, bool model_samples_on_device, SequenceChunk& chunk) {
  chunk.sample_on = SampleOn::host;
  const bool draws_token = chunk.past_len + static_cast<int32_t>(chunk.tokens.size()) == seq.num_tokens();
  if (!model_samples_on_device || !draws_token || chunk.all_logits || !device_can_sample(seq)) return;
  if (is_greedy(seq.request.sampling) && !has_penalty(seq.request.sampling) && seq.matcher == nullptr) {
    chunk.sample_on = SampleOn::device_argmax;
    return;
  }
  chunk.sample_on = SampleOn::device;
  chunk.device_sampling = device_sampling_of(seq);
}

}  // namespace engine
