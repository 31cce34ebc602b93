// The FakeModel as a model that samples on its device (Model::samples_on_device), as the CUDA decoder does: rows
// of chunks whose SampleOn is not host are drawn inside forward() — with the host sampler over the chunk's
// DeviceSampling (its guide mask included), standing in for kernels.h's sample_rows — and returned as tokens
// without a logits row. It lets CPU tests drive the executor's device-sampling paths (guided masks filled by the
// sampling prep during the pass, the budget redraw) that otherwise run only on a GPU.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "fake-model.h"
#include "sampling/sampler.h"

namespace test {

class DeviceSamplingFakeModel : public FakeModel {
 public:
  using FakeModel::FakeModel;
  bool samples_on_device() const override { return true; }
  // The processed row of a device-drawn chunk, as the CUDA sampler leaves it; with gives_rows false, never (the
  // executor then recomputes the step instead).
  bool sampled_row(int32_t chunk, std::vector<float>& row) override {
    if (!gives_rows || chunk < 0 || static_cast<size_t>(chunk) >= processed_.size() || processed_[static_cast<size_t>(chunk)].empty())
      return false;
    row = processed_[static_cast<size_t>(chunk)];
    ++rows_given;
    return true;
  }

  void forward(const std::vector<engine::SequenceChunk>& chunks, engine::ForwardOutput& out) override {
    engine::ForwardOutput all;
    FakeModel::forward(chunks, all);
    run_sampling_prep();  // as the CUDA decoder does once the layers are enqueued: the guided rows' masks
    const size_t V = static_cast<size_t>(all.vocab_size);
    out.vocab_size = all.vocab_size;
    out.logits.clear();
    out.first_row.assign(chunks.size(), -1);
    out.sampled.assign(chunks.size(), engine::DeviceSample{});
    out.first_sample.assign(chunks.size(), -1);
    out.row_samples.clear();
    processed_.assign(chunks.size(), {});
    for (size_t i = 0; i < chunks.size(); ++i) {
      const engine::SequenceChunk& c = chunks[i];
      const size_t rows = c.all_logits ? c.tokens.size() : 1;
      const float* first = all.logits.data() + static_cast<size_t>(all.first_row[i]) * V;
      if (c.sample_on == engine::SampleOn::host) {
        out.first_row[i] = static_cast<int32_t>(out.logits.size() / V);
        out.logits.insert(out.logits.end(), first, first + rows * V);
        ++host_rows;
        continue;
      }
      const engine::DeviceSampling& d = c.device_sampling;
      if (c.all_logits) {  // a speculative step's check: every row drawn, row r as the draw of step + r
        if (!d.penalty_tokens.empty() || d.guided) throw std::logic_error("all_logits with penalties or a guide");
        const bool argmax = c.sample_on == engine::SampleOn::device_argmax || d.greedy;
        engine::SamplingConfig cfg;
        cfg.temperature = argmax ? 0.0f : d.temperature;
        cfg.top_k = d.top_k;
        if (d.top_p < 1.0f || d.top_k == 0) cfg.top_p = d.top_p;
        cfg.seed = d.seed;
        engine::SamplingContext ctx;
        ctx.config = &cfg;
        out.first_sample[i] = static_cast<int32_t>(out.row_samples.size());
        for (size_t r = 0; r < rows; ++r) {
          ctx.step = d.step + r;
          const engine::SampledToken t = sampler_.sample(first + r * V, all.vocab_size, ctx);
          out.row_samples.push_back(engine::DeviceSample{t.token, t.log_prob});
        }
        out.sampled[i] = out.row_samples.back();
        ++(argmax ? argmax_row_chunks : drawn_row_chunks);
        continue;
      }
      if (!d.penalty_tokens.empty()) throw std::runtime_error("DeviceSamplingFakeModel: penalties are not emulated");
      if (d.guided && d.allowed.empty()) throw std::logic_error("a guided row arrived without its token mask");
      engine::SamplingConfig cfg;
      if (c.sample_on == engine::SampleOn::device_argmax || d.greedy) {
        cfg.temperature = 0.0f;
      } else {
        cfg.temperature = d.temperature;
        cfg.top_k = d.top_k;
        if (d.top_p < 1.0f || d.top_k == 0) cfg.top_p = d.top_p;  // (the kernel reads top_p 1 as no nucleus)
        cfg.seed = d.seed;
      }
      engine::SamplingContext ctx;
      ctx.config = &cfg;
      ctx.step = d.step;
      if (!d.allowed.empty()) {
        ctx.allowed = &d.allowed;
        ++masked_rows;
      }
      const float* last = first + (rows - 1) * V;
      const engine::SampledToken t = sampler_.sample(last, all.vocab_size, ctx);
      out.sampled[i] = engine::DeviceSample{t.token, t.log_prob};
      // What the kernel leaves in the row: NaN and masked tokens -inf, times 1 / temperature when sampling.
      std::vector<float>& p = processed_[i];
      p.assign(last, last + V);
      const float inv_t = engine::is_greedy(cfg) ? 1.0f : 1.0f / cfg.temperature;
      for (size_t t = 0; t < V; ++t) {
        const bool banned = p[t] != p[t] || (!d.allowed.empty() && !((d.allowed[t >> 6] >> (t & 63)) & 1u));
        p[t] = banned ? -INFINITY : p[t] * inv_t;
      }
      ++device_rows;
    }
  }

  std::atomic<int> device_rows{0};  // rows drawn "on the device"
  std::atomic<int> masked_rows{0};  // of which under a guide's mask
  std::atomic<int> host_rows{0};    // chunks whose row went back for the executor's sampler
  std::atomic<int> argmax_row_chunks{0};  // all_logits chunks whose every row's argmax was taken here
  std::atomic<int> drawn_row_chunks{0};   // all_logits chunks whose every row was sampled here
  std::atomic<int> rows_given{0};   // sampled_row answers
  bool gives_rows = true;

 private:
  engine::Sampler sampler_;
  std::vector<std::vector<float>> processed_;  // per chunk of the last forward; empty: not drawn here
};

}  // namespace test
