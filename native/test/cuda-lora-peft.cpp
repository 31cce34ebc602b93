// The PEFT fixtures (test/fixtures/lora/tiny-llama: three adapters and PEFT's merged-model greedy tokens, made by
// scripts/fixtures/make_lora_fixtures.py) served by the executor over the CUDA model, preloaded as --lora-modules
// would, every case of the base and of each adapter in one held batch (and again with one adapter slot, so slots
// reload between iterations). Each request's context logits are compared with the CPU model's (which equals PEFT
// exactly, executor-lora.cpp): an adapter's requests may differ no more than the base model's own bf16 rounding
// does (this fixture's logits are wide: about 1 unit on the base), where a wrong slice, slot or scale would move
// them by several; greedy tokens must be PEFT's wherever the case's smallest top-1 margin is over twice that
// difference, and how many equal PEFT's in all is printed. Skips where no GPU is visible.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "executor/executor.h"
#include "loading/json.h"
#include "model/model.h"

using namespace engine;

namespace {

struct Case {
  std::string label;
  std::vector<int32_t> input, want;
  std::optional<uint64_t> task;
  double min_margin = 0;
};

struct Got {
  std::vector<int32_t> tokens;
  std::vector<float> context;
  bool error = false;
  std::string message;
};

std::map<RequestId, Got> run(const std::string& base, const std::string& root, Device device, int32_t max_loras,
                             const std::vector<Case>& cases, std::vector<RequestId>& ids) {
  ExecutorConfig c;
  c.tokens_per_block = 16;
  c.max_batch_size = 64;
  c.max_seq_len = 128;
  c.max_tokens_in_paged_kv_cache = 64 * 128;
  c.lora.enabled = true;
  c.lora.max_loras = max_loras;
  for (const char* name : {"alpha", "beta", "gamma"})
    c.lora.preloaded.push_back({c.lora.preloaded.size() + 1, root + "/" + name});
  Executor ex(load_model(base, cudatest::options(device)), c);
  ex.hold_iterations(0);
  ids.clear();
  for (const Case& k : cases) {
    Request r;
    r.input_token_ids = k.input;
    r.max_tokens = static_cast<int32_t>(k.want.size());
    r.sampling.temperature = 0;
    r.output.exclude_input_from_output = true;
    r.output.return_context_logits = true;
    if (k.task) r.lora = LoraRequest{*k.task, nullptr};
    ids.push_back(ex.enqueue(r));
  }
  ex.hold_iterations(-1);
  std::map<RequestId, Got> out;
  std::set<RequestId> pending(ids.begin(), ids.end());
  while (!pending.empty()) {
    for (auto& r : ex.await_responses(std::chrono::milliseconds(50))) {
      Got& g = out[r.request_id];
      if (r.has_error) {
        g.error = true;
        g.message = r.error_message;
      } else {
        if (!r.result.output_token_ids.empty())
          g.tokens.insert(g.tokens.end(), r.result.output_token_ids[0].begin(), r.result.output_token_ids[0].end());
        if (!r.result.context_logits.empty()) g.context = r.result.context_logits;
      }
      if (r.result.is_final || r.has_error) pending.erase(r.request_id);
    }
  }
  return out;
}

}  // namespace

TEST_MAIN({
  const std::string base = check::repo_root + "/test/fixtures/models/tiny-llama";
  const std::string root = check::repo_root + "/test/fixtures/lora/tiny-llama";
  try {
    resolve_device(Device::cuda);
  } catch (const EngineError& e) {
    return check::skip("no CUDA device: %s", e.what());
  }
  const json::Value ref = json::parse_file(root + "/reference.json");
  std::vector<Case> cases;
  auto add = [&](const json::Value& list, std::optional<uint64_t> task, const std::string& name) {
    for (const auto& c : list.as_array()) {
      Case k;
      k.label = name + "/" + c.find("name")->as_string();
      for (const auto& v : c.find("input_ids")->as_array()) k.input.push_back(static_cast<int32_t>(v.as_int64()));
      for (const auto& v : c.find("greedy_output_ids")->as_array()) k.want.push_back(static_cast<int32_t>(v.as_int64()));
      k.task = task;
      k.min_margin = c.find("min_top1_margin")->as_number();
      cases.push_back(std::move(k));
    }
  };
  add(*ref.find("base_cases"), std::nullopt, "base");
  uint64_t task = 1;
  for (const char* name : {"alpha", "beta", "gamma"}) add(*ref.find("adapters")->find(name)->find("cases"), task++, name);

  std::vector<RequestId> cpu_ids, gpu_ids;
  const auto cpu = run(base, root, Device::cpu, 0, cases, cpu_ids);
  for (int32_t max_loras : {0, 1}) {
    const auto gpu = run(base, root, Device::cuda, max_loras, cases, gpu_ids);
    int judged = 0, equal = 0;
    double base_err = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Got& c = cpu.at(cpu_ids[i]);
      const Got& g = gpu.at(gpu_ids[i]);
      CHECK_MSG(!c.error && !g.error, "%s: %s%s", cases[i].label.c_str(), c.message.c_str(), g.message.c_str());
      CHECK_MSG(c.tokens == cases[i].want, "%s: the CPU model differs from PEFT", cases[i].label.c_str());
      double err = 1e9;
      if (c.context.size() == g.context.size() && !c.context.empty())
        err = cudatest::max_abs_err(g.context.data(), c.context.data(), c.context.size());
      const bool clear = cases[i].min_margin > 2 * err;
      judged += clear;
      equal += clear && g.tokens == cases[i].want;
      std::printf("max_loras %d %s: context logits max abs err %.3g against the CPU model, min margin %.3g, greedy %s\n",
                  max_loras, cases[i].label.c_str(), err, cases[i].min_margin,
                  g.tokens == cases[i].want ? "= PEFT" : (clear ? "DIFFERS at a clear margin" : "differs (close call)"));
      if (!cases[i].task) base_err = std::max(base_err, err);  // base cases come first
      CHECK_MSG(err <= 1.5 * base_err, "%s: GPU logits %.3g from the CPU model's, the base model's at most %.3g",
                cases[i].label.c_str(), err, base_err);
      CHECK_MSG(!clear || g.tokens == cases[i].want, "%s: greedy differs from PEFT at a clear margin",
                cases[i].label.c_str());
    }
    int same = 0;
    for (size_t i = 0; i < cases.size(); ++i) same += gpu.at(gpu_ids[i]).tokens == cases[i].want;
    std::printf("max_loras %d: %d/%zu requests give PEFT's greedy tokens; %d judged at a clear margin, %d of them equal\n",
                max_loras, same, cases.size(), judged, equal);
  }
})
