// Helpers for the CUDA backend's tests (built only with the backend): small checkpoint configs written to a temp
// directory (weights come from load_format "dummy", identical on the CPU and the GPU), relative errors, and a
// response collector for executor-level checks.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lora-test-util.h"
#include "executor/executor.h"
#include "lora/lora-adapter.h"
#include "model/dummy-value.h"
#include "model/model.h"

namespace cudatest {

inline std::string write_config(const std::string& name, const std::string& json) {
  char tmpl[] = "/tmp/cuda-test-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  const std::string d = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(d.c_str(), 0755);
  FILE* f = std::fopen((d + "/config.json").c_str(), "w");
  std::fputs(json.c_str(), f);
  std::fclose(f);
  return d;
}

// ‖a − b‖ / ‖b‖ over the first n values (the library METHOD's measure: bf16 operands land between 1e-3 and 1e-2).
inline double rel_err(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// max |a − b| (the scale against which a top-1 margin is "too close to call").
inline double max_abs_err(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

inline double top1_margin(const float* row, int32_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int32_t i = 0; i < n; ++i) {
    if (row[i] > a) {
      b = a;
      a = row[i];
    } else if (row[i] > b) {
      b = row[i];
    }
  }
  return static_cast<double>(a) - b;
}

inline int32_t argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

inline engine::LoadOptions options(engine::Device device, const std::string& load_format = "auto") {
  engine::LoadOptions o;
  o.device = device;
  o.load_format = load_format;
  o.max_num_tokens = 2048;
  o.max_batch_size = 64;
  return o;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> log_probs;
  engine::FinishReason reason = engine::FinishReason::not_finished;
  bool has_error = false;
  std::string error;
  int responses = 0;
};

// Collects every response until each id had its final one (or the deadline passed).
inline std::map<engine::RequestId, Outcome> collect(engine::Executor& ex, std::set<engine::RequestId> pending,
                                                    double timeout_s = 120) {
  std::map<engine::RequestId, Outcome> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto& r : ex.await_responses(std::chrono::milliseconds(50))) {
      Outcome& o = out[r.request_id];
      ++o.responses;
      if (r.has_error) {
        o.has_error = true;
        o.error = r.error_message;
      } else if (!r.result.output_token_ids.empty()) {
        const auto& t = r.result.output_token_ids[0];
        o.tokens.insert(o.tokens.end(), t.begin(), t.end());
        if (!r.result.log_probs.empty())
          o.log_probs.insert(o.log_probs.end(), r.result.log_probs[0].begin(), r.result.log_probs[0].end());
        if (!r.result.finish_reasons.empty()) o.reason = r.result.finish_reasons[0];
      }
      if (r.result.is_final || r.has_error) pending.erase(r.request_id);
    }
  }
  return out;
}

// Offline traffic of the benchmarks (cuda-bench, cuda-parallel --offline): `warmup` requests of 8 tokens, not
// measured, then `requests` requests of `input` random token ids and `output` tokens enqueued at once, greedy or
// (sampled) temperature 0.8 / top-p 0.95 / one seed each. Output tokens, failures and seconds of the measured part.
// A LoRA adapter of `rank` on `modules` of `layers` with values k/128 times a power-of-two scale (model/dummy-value.h's
// hash of seed, layer, module), exact in bf16 and fp16, so a CPU model and a GPU model hold the very same adapter.
// A in steps of a_scale (about the dummy weights' 1/32 keeps x Aᵀ at the size of a projection's output), B in
// steps of b_scale (the size of the deltas).
inline engine::LoraAdapter dummy_lora_adapter(const engine::ModelConfig& c, int32_t rank,
                                              const std::vector<engine::LoraModule>& modules,
                                              const std::vector<int32_t>& layers, uint64_t seed, float a_scale,
                                              float b_scale) {
  return test::lora_adapter_of(c, modules, layers, rank,
                               [&](int32_t l, engine::LoraModule m, bool is_b, std::vector<float>& v) {
                                 const uint32_t tensor = static_cast<uint32_t>(l * 16 + static_cast<int32_t>(m)) * 2;
                                 for (size_t i = 0; i < v.size(); ++i)
                                   v[i] = engine::dummy_value(seed, tensor + (is_b ? 1 : 0), i, is_b ? b_scale : a_scale);
                               });
}

struct OfflineResult {
  int64_t tokens = 0;
  int failed = 0;
  size_t answered = 0;
  double seconds = 0;
};
// decorate(request, i): called on warm-up request i and on measured request i before each is enqueued (LoRA runs
// name their adapters there).
inline OfflineResult run_offline(engine::Executor& ex, int requests, int input, int output, int warmup, bool sampled,
                                 const std::function<void(engine::Request&, int)>& decorate = {}) {
  const int32_t vocab = ex.model_config().vocab_size;
  uint64_t rng = 12345;
  auto request = [&](int32_t max_tokens) {
    engine::Request r;
    for (int k = 0; k < input; ++k) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      r.input_token_ids.push_back(static_cast<int32_t>((rng >> 33) % static_cast<uint64_t>(vocab)));
    }
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    r.output.exclude_input_from_output = true;
    return r;
  };
  std::set<engine::RequestId> warm;
  for (int i = 0; i < warmup; ++i) {
    engine::Request r = request(8);
    if (decorate) decorate(r, i);
    warm.insert(ex.enqueue(r));
  }
  collect(ex, warm, 600);
  ex.get_latest_iteration_stats();  // the warm-up's iterations are not part of the breakdown
  std::set<engine::RequestId> ids;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < requests; ++i) {
    engine::Request r = request(output);
    if (sampled) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = static_cast<uint64_t>(i);
    }
    if (decorate) decorate(r, i);
    ids.insert(ex.enqueue(r));
  }
  const auto outcomes = collect(ex, ids, 1200);
  OfflineResult res;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.answered = outcomes.size();
  for (const auto& [id, o] : outcomes) {
    res.tokens += static_cast<int64_t>(o.tokens.size());
    if (o.has_error) ++res.failed;
  }
  return res;
}

// Where an offline run's time went, from the executor's iteration stats: iterations that carried prompt tokens
// (mixed with decode rows) against decode-only ones, and the wall time no iteration accounts for (the loop between
// iterations: delivery, waiting for work).
inline void print_breakdown(const std::deque<engine::IterationStats>& stats, double wall_s) {
  int64_t ctx_iters = 0, dec_iters = 0, ctx_tokens = 0, ctx_gen_rows = 0, dec_rows = 0;
  double ctx_ms = 0, dec_ms = 0;
  for (const engine::IterationStats& st : stats) {
    const auto& ib = st.inflight_batching_stats;
    if (ib.num_ctx_tokens > 0) {
      ++ctx_iters, ctx_ms += st.iter_latency_ms, ctx_tokens += ib.num_ctx_tokens, ctx_gen_rows += ib.num_gen_requests;
    } else if (ib.num_gen_requests > 0) {
      ++dec_iters, dec_ms += st.iter_latency_ms, dec_rows += ib.num_gen_requests;
    }
  }
  std::printf("offline breakdown (%zu iterations): %lld with prompt tokens %.3f s (%lld prompt tokens, %.0f a step, "
              "%.1f decode rows beside them, %.2f ms a step); %lld decode-only %.3f s (mean batch %.1f, %.3f ms a step); "
              "outside iterations %.3f s of %.3f s\n",
              stats.size(), static_cast<long long>(ctx_iters), ctx_ms / 1e3, static_cast<long long>(ctx_tokens),
              ctx_iters ? static_cast<double>(ctx_tokens) / ctx_iters : 0.0,
              ctx_iters ? static_cast<double>(ctx_gen_rows) / ctx_iters : 0.0, ctx_iters ? ctx_ms / ctx_iters : 0.0,
              static_cast<long long>(dec_iters), dec_ms / 1e3, dec_iters ? static_cast<double>(dec_rows) / dec_iters : 0.0,
              dec_iters ? dec_ms / dec_iters : 0.0, wall_s - (ctx_ms + dec_ms) / 1e3, wall_s);
}

}  // namespace cudatest
