// LoRA through the executor on the CPU model: requests of different adapters and of none in one batch give what
// each adapter's merged checkpoint (W + B·A written out by this test) gives alone; the adapters-per-batch limit,
// slot reloads, the host cache's eviction, task ids without weights, prefix reuse under adapters, and the refusals.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <string>

#include "check.h"
#include "executor-test-util.h"
#include "lora-test-util.h"
#include "loading/json.h"
#include "loading/safetensors.h"
#include "lora/lora-adapter.h"
#include "lora/lora-tensors.h"
#include "model/model.h"
#include "temp-dir.h"

using namespace engine;

namespace {

// The checkpoint tensor a module adapts: model.layers.<l>.self_attn.q_proj.weight, ... .mlp.down_proj.weight.
std::string tensor_of(int32_t layer, LoraModule m) {
  const bool attention = m == LoraModule::attn_q || m == LoraModule::attn_k || m == LoraModule::attn_v ||
                         m == LoraModule::attn_dense;
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + lora_module_hf_name(m) +
         ".weight";
}

// The base checkpoint with every adapted weight replaced by W + B·A, in a directory of its own.
std::string write_merged(const std::string& base, const LoraAdapter& adapter) {
  const std::string dir = test::make_temp_dir("lora-merged");
  {
    std::ifstream in(base + "/config.json");
    std::ofstream(dir + "/config.json") << in.rdbuf();
  }
  SafetensorsFile f(base + "/model.safetensors");
  std::vector<TensorToWrite> out;
  for (const TensorInfo& t : f.tensors()) {
    if (t.dtype != DType::f32) throw std::runtime_error("expected an f32 fixture, got " + t.dtype_name);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, t.nbytes);
    for (const LoraWeight& w : adapter.weights) {
      if (t.name != tensor_of(w.layer, w.module)) continue;
      for (int64_t o = 0; o < w.out; ++o)
        for (int64_t i = 0; i < w.in; ++i) {
          double s = 0;
          for (int32_t k = 0; k < w.rank; ++k) s += double(w.b[o * w.rank + k]) * w.a[k * w.in + i];
          v[o * w.in + i] += static_cast<float>(s);
        }
    }
    TensorToWrite tw{t.name, DType::f32, t.shape, {}};
    tw.bytes.resize(v.size() * 4);
    std::memcpy(tw.bytes.data(), v.data(), tw.bytes.size());
    out.push_back(std::move(tw));
  }
  write_safetensors(dir + "/model.safetensors", out);
  return dir;
}

ExecutorConfig lora_config(int32_t max_loras = 0, int64_t host_bytes = int64_t{1} << 30) {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.max_num_tokens = 512;
  c.tokens_per_block = 4;
  c.max_seq_len = 128;
  c.lora.enabled = true;
  c.lora.max_loras = max_loras;
  c.lora.host_memory_bytes = host_bytes;
  return c;
}

std::unique_ptr<Executor> make_executor(const std::string& dir, ExecutorConfig config) {
  LoadOptions o;
  o.num_threads = 1;
  return std::make_unique<Executor>(load_model(dir, o), config);
}

std::map<RequestId, test::Outcome> collect(Executor& e, const std::set<RequestId>& ids) {
  std::map<RequestId, test::Outcome> out;
  std::set<RequestId> pending = ids;
  while (!pending.empty()) {
    for (auto& r : e.await_responses(std::chrono::milliseconds(100))) {
      const RequestId id = r.request_id;
      const bool fin = r.result.is_final;
      test::Harness::absorb(out, std::move(r));
      if (fin) pending.erase(id);
    }
  }
  return out;
}

Request request(std::vector<int32_t> prompt, std::optional<uint64_t> task,
                std::shared_ptr<const LoraAdapter> adapter = nullptr) {
  Request r = test::make_request(std::move(prompt), 12);
  r.output.return_log_probs = true;
  if (task) r.lora = LoraRequest{*task, std::move(adapter)};
  return r;
}

const std::vector<std::vector<int32_t>> kPrompts = {test::prompt_of(9, 1, 512), test::prompt_of(14, 2, 512),
                                                    test::prompt_of(5, 3, 512)};

// Greedy outputs of `dir` for every prompt, one request at a time.
std::vector<test::Outcome> plain_outputs(const std::string& dir) {
  ExecutorConfig c = lora_config();
  c.lora.enabled = false;
  auto e = make_executor(dir, c);
  std::vector<test::Outcome> out;
  for (const auto& p : kPrompts) {
    const RequestId id = e->enqueue(request(p, std::nullopt));
    out.push_back(collect(*e, {id}).at(id));
  }
  return out;
}

// Same tokens, log probs within float32 reassociation (W x + B (A x) against (W + B A) x).
void expect_same(const test::Outcome& got, const test::Outcome& want, const char* what) {
  CHECK_MSG(!got.has_error, "%s: error %s", what, got.error_message.c_str());
  CHECK_MSG(got.tokens == want.tokens, "%s: tokens differ from the merged checkpoint's", what);
  double worst = 0;
  for (size_t i = 0; i < std::min(got.log_probs.size(), want.log_probs.size()); ++i)
    worst = std::max(worst, std::fabs(double(got.log_probs[i]) - want.log_probs[i]));
  CHECK_MSG(worst < 2e-3, "%s: log probs differ by %g", what, worst);
}

// One reference case of test/fixtures/lora (scripts/fixtures/make_lora_fixtures.py: PEFT's merged model in float64).
struct RefCase {
  std::vector<int32_t> input, want;
  int32_t max_new_tokens = 0;
};

std::vector<RefCase> ref_cases(const json::Value& cases) {
  std::vector<RefCase> out;
  for (const auto& c : cases.as_array()) {
    RefCase r;
    for (const auto& v : c.find("input_ids")->as_array()) r.input.push_back(static_cast<int32_t>(v.as_int64()));
    for (const auto& v : c.find("greedy_output_ids")->as_array()) r.want.push_back(static_cast<int32_t>(v.as_int64()));
    r.max_new_tokens = static_cast<int32_t>(c.find("max_new_tokens")->as_int64());
    out.push_back(std::move(r));
  }
  return out;
}

// The fixture's adapters, preloaded as --lora-modules would (task ids 1, 2, 3 in order), and beta's TensorRT-LLM
// request tensors, all in one batch with the base: every output is PEFT's merged model's, token for token.
void check_peft_fixtures(const std::string& base) {
  const std::string root = check::repo_root + "/test/fixtures/lora/tiny-llama";
  const json::Value ref = json::parse_file(root + "/reference.json");
  const std::vector<std::string> names = {"alpha", "beta", "gamma"};
  // A host cache too small for two adapters: the preloaded ones are read again from their directories as the
  // batch's requests name them, and a slot per batch (max_loras 1) reloads the model's slot between them.
  for (const auto& [max_loras, host_bytes] : std::vector<std::pair<int32_t, int64_t>>{{0, int64_t{1} << 30}, {1, 80000}}) {
    ExecutorConfig c = lora_config(max_loras, host_bytes);
    for (size_t i = 0; i < names.size(); ++i) c.lora.preloaded.push_back({i + 1, root + "/" + names[i]});
    auto e = make_executor(base, c);
    e->hold_iterations(0);
    std::vector<std::tuple<RequestId, std::vector<int32_t>, std::string>> want;
    auto add = [&](const RefCase& rc, std::optional<uint64_t> task, std::shared_ptr<const LoraAdapter> a,
                   const std::string& label) {
      Request r = test::make_request(rc.input, rc.max_new_tokens);
      r.output.exclude_input_from_output = true;
      if (task) r.lora = LoraRequest{*task, std::move(a)};
      want.emplace_back(e->enqueue(r), rc.want, label);
    };
    for (const RefCase& rc : ref_cases(*ref.find("base_cases"))) add(rc, std::nullopt, nullptr, "base");
    for (size_t i = 0; i < names.size(); ++i)
      for (const RefCase& rc : ref_cases(*ref.find("adapters")->find(names[i])->find("cases")))
        add(rc, i + 1, nullptr, names[i]);
    // Beta again, from lora_weights / lora_config under a task id of its own.
    SafetensorsFile t(root + "/beta/trtllm-tensors.safetensors");
    const TensorInfo* w = t.find("lora_weights");
    const TensorInfo* cfg = t.find("lora_config");
    CHECK(w && cfg && w->shape.size() == 3 && cfg->shape.size() == 3);
    if (!w || !cfg || w->shape.size() != 3 || cfg->shape.size() != 3) return;
    auto beta = std::make_shared<const LoraAdapter>(lora_from_tensors(
        e->model_config(), 64, reinterpret_cast<const float*>(w->data), w->shape[1], w->shape[2],
        reinterpret_cast<const int32_t*>(cfg->data), cfg->shape[1], cfg->shape[2]));
    bool first = true;
    for (const RefCase& rc : ref_cases(*ref.find("adapters")->find("beta")->find("cases"))) {
      add(rc, 77, first ? beta : nullptr, "beta from lora_weights");
      first = false;
    }
    e->hold_iterations(-1);
    std::set<RequestId> ids;
    for (auto& x : want) ids.insert(std::get<0>(x));
    auto got = collect(*e, ids);
    for (auto& [id, tokens, label] : want) {
      const test::Outcome& o = got.at(id);
      CHECK_MSG(!o.has_error && o.tokens == tokens, "%s (max_loras %d): greedy tokens differ from PEFT's merged model%s%s",
                label.c_str(), max_loras, o.has_error ? ": " : "", o.error_message.c_str());
    }
    CHECK(test::all_blocks_free(*e));
  }
}

}  // namespace

TEST_MAIN({
  const std::string base = check::repo_root + "/test/fixtures/models/tiny-llama";
  if (!check::exists(base + "/model.safetensors")) return check::skip("no fixture at %s", base.c_str());
  const ModelConfig mc = [&] {
    LoadOptions o;
    return load_model(base, o)->config();
  }();
  using test::random_adapter;
  auto alpha = random_adapter(mc, test::all_lora_modules(), {0, 1}, 4, 11);
  auto beta = random_adapter(mc, {LoraModule::attn_q, LoraModule::attn_v, LoraModule::mlp_4h_to_h}, {1}, 2, 22);
  const std::vector<test::Outcome> base_out = plain_outputs(base);
  const std::vector<test::Outcome> alpha_out = plain_outputs(write_merged(base, *alpha));
  const std::vector<test::Outcome> beta_out = plain_outputs(write_merged(base, *beta));
  // The adapters must matter, or equality below would prove nothing.
  int changed = 0;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    changed += (alpha_out[i].tokens != base_out[i].tokens) + (beta_out[i].tokens != base_out[i].tokens);
  CHECK_MSG(changed >= 4, "only %d of 6 outputs changed under the adapters", changed);

  // One batch: every prompt under the base, alpha (task 1) and beta (task 2), held until all are queued.
  for (int32_t max_loras : {0, 1, 2}) {
    auto e = make_executor(base, lora_config(max_loras));
    e->hold_iterations(0);
    std::vector<std::pair<RequestId, const test::Outcome*>> want;
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      want.push_back({e->enqueue(request(kPrompts[i], 1, i == 0 ? alpha : nullptr)), &alpha_out[i]});
      want.push_back({e->enqueue(request(kPrompts[i], std::nullopt)), &base_out[i]});
      want.push_back({e->enqueue(request(kPrompts[i], 2, i == 0 ? beta : nullptr)), &beta_out[i]});
    }
    e->hold_iterations(-1);
    std::set<RequestId> ids;
    for (auto& w : want) ids.insert(w.first);
    auto got = collect(*e, ids);
    for (auto& [id, o] : want) expect_same(got.at(id), *o, ("mixed batch, max_loras " + std::to_string(max_loras)).c_str());
    CHECK(test::all_blocks_free(*e));
  }

  // The host cache holds one adapter: sending beta evicts alpha, whose task id alone is then refused; sent again,
  // it gives the same output.
  {
    auto e = make_executor(base, lora_config(0, static_cast<int64_t>(alpha->bytes())));
    RequestId id = e->enqueue(request(kPrompts[0], 1, alpha));
    expect_same(collect(*e, {id}).at(id), alpha_out[0], "alpha before eviction");
    id = e->enqueue(request(kPrompts[0], 1));
    expect_same(collect(*e, {id}).at(id), alpha_out[0], "alpha by task id alone");
    id = e->enqueue(request(kPrompts[1], 2, beta));
    expect_same(collect(*e, {id}).at(id), beta_out[1], "beta");
    CHECK_THROWS(e->enqueue(request(kPrompts[0], 1)), "lora_task_id 1 is not in the LoRA cache");
    id = e->enqueue(request(kPrompts[0], 1, alpha));
    expect_same(collect(*e, {id}).at(id), alpha_out[0], "alpha sent again");
    CHECK(test::all_blocks_free(*e));
  }

  // Prefix reuse keeps adapters apart: the same prompt under the base, then alpha, then the base again.
  {
    ExecutorConfig c = lora_config();
    c.enable_kv_cache_reuse = true;
    auto e = make_executor(base, c);
    for (auto [task, want] : std::vector<std::pair<std::optional<uint64_t>, const test::Outcome*>>{
             {std::nullopt, &base_out[1]}, {1, &alpha_out[1]}, {std::nullopt, &base_out[1]}, {1, &alpha_out[1]}}) {
      const RequestId id = e->enqueue(request(kPrompts[1], task, task ? alpha : nullptr));
      expect_same(collect(*e, {id}).at(id), *want, "prefix reuse");
    }
    CHECK(e->kv_cache_stats().reused_blocks > 0);  // the repeats did reuse their own blocks
  }

  check_peft_fixtures(base);

  // Refusals name the field and the numbers, and leave nothing behind.
  {
    auto e = make_executor(base, lora_config());
    CHECK_THROWS(e->enqueue(request(kPrompts[0], 99)), "lora_task_id 99 is not in the LoRA cache");
    auto big = random_adapter(mc, {LoraModule::attn_q}, {0}, 65, 1);
    CHECK_THROWS(e->enqueue(request(kPrompts[0], 3, big)), "65");
    auto wrong = std::make_shared<LoraAdapter>(*beta);
    wrong->weights[0].layer = 7;
    CHECK_THROWS(e->enqueue(request(kPrompts[0], 4, wrong)), "layer 7");
    CHECK(e->num_active_requests() == 0);
    // A preloaded adapter whose config disagrees with its tensors stops the startup, naming it and the numbers.
    const std::string bad = test::make_temp_dir("lora-bad");
    const std::string alpha_dir = check::repo_root + "/test/fixtures/lora/tiny-llama/alpha";
    std::filesystem::copy_file(alpha_dir + "/adapter_model.safetensors", bad + "/adapter_model.safetensors");
    {
      std::ifstream in(alpha_dir + "/adapter_config.json");
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const size_t at = text.find("\"r\": 8");
      CHECK(at != std::string::npos);
      if (at != std::string::npos) text.replace(at, 6, "\"r\": 4");
      std::ofstream(bad + "/adapter_config.json") << text;
    }
    ExecutorConfig preload_bad = lora_config();
    preload_bad.lora.preloaded = {{1, check::repo_root + "/test/fixtures/lora/tiny-llama/beta"}, {2, bad}};
    CHECK_THROWS(make_executor(base, preload_bad), "preloaded as task id 2 (--lora-modules)");
    CHECK_THROWS(make_executor(base, preload_bad), "gives it r 4");
    ExecutorConfig off = lora_config();
    off.lora.enabled = false;
    auto plain = make_executor(base, off);
    CHECK_THROWS(plain->enqueue(request(kPrompts[0], 1, alpha)), "LoRA is not enabled");
  }
})
