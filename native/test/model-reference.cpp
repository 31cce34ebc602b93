// The engine against Hugging Face transformers (float64) on the tiny fixtures in test/fixtures/models: context
// logits within 1e-4 relative error, and greedy continuations, decoded step by step through the paged KV cache,
// identical token for token.
#include <algorithm>
#include <cmath>

#include "check.h"
#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/json.h"
#include "model/model.h"

using namespace engine;

namespace {

int32_t argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

double log_softmax_at(const float* row, int32_t n, int32_t i) {
  double m = *std::max_element(row, row + n), z = 0;
  for (int32_t j = 0; j < n; ++j) z += std::exp(static_cast<double>(row[j]) - m);
  return row[i] - m - std::log(z);
}

// `reference`: the reference files' name (reference.json / .safetensors), `options`: how the model is loaded.
void check_fixture(const std::string& dir, const std::string& label, const std::string& reference = "reference",
                   const LoadOptions& options = LoadOptions{}) {
  std::unique_ptr<Model> model = load_model(dir, options);
  const int32_t vocab = model->config().vocab_size;
  const int32_t tpb = 16;
  model->allocate_kv(64, tpb);
  std::vector<int32_t> block_ids(64);
  // Blocks in a scrambled order, as a busy pool would hand them out.
  for (int32_t i = 0; i < 64; ++i) block_ids[i] = (i * 37 + 11) % 64;

  json::Value ref = json::parse_file(dir + "/" + reference + ".json");
  SafetensorsFile ref_tensors(dir + "/" + reference + ".safetensors");
  const auto& cases = ref.find("cases")->as_array();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const json::Value& c = cases[ci];
    const std::string name = label + "/" + c.find("name")->as_string();
    std::vector<int32_t> input;
    for (const auto& v : c.find("input_ids")->as_array()) input.push_back(static_cast<int32_t>(v.as_int64()));
    const int32_t n = static_cast<int32_t>(input.size());

    // Context logits.
    ForwardOutput out;
    model->forward({{input, 0, block_ids, true}}, out);
    const TensorInfo* want = ref_tensors.find("case" + std::to_string(ci) + ".context_logits");
    CHECK_MSG(want && want->dtype == DType::f32 && want->numel() == static_cast<int64_t>(n) * vocab,
              "%s: reference logits missing or mis-shaped", name.c_str());
    if (want && want->numel() == static_cast<int64_t>(out.logits.size())) {
      const float* w = reinterpret_cast<const float*>(want->data);
      double num = 0, den = 0;
      for (size_t i = 0; i < out.logits.size(); ++i) {
        num = std::max(num, std::fabs(static_cast<double>(out.logits[i]) - w[i]));
        den = std::max(den, std::fabs(static_cast<double>(w[i])));
      }
      std::printf("%s: context logits max rel err %.3g\n", name.c_str(), num / den);
      CHECK_MSG(num / den < 1e-4, "%s: context logits rel err %g", name.c_str(), num / den);
    }

    // Greedy continuation, one decode step at a time.
    std::vector<int32_t> want_ids;
    for (const auto& v : c.find("greedy_output_ids")->as_array()) want_ids.push_back(static_cast<int32_t>(v.as_int64()));
    std::vector<double> want_lp;
    for (const auto& v : c.find("greedy_log_probs")->as_array()) want_lp.push_back(v.as_number());
    std::vector<int32_t> got;
    double lp_err = 0;
    const float* last = out.logits.data() + static_cast<size_t>(n - 1) * vocab;
    std::vector<float> row(last, last + vocab);
    for (size_t step = 0; step < want_ids.size(); ++step) {
      int32_t tok = argmax(row.data(), vocab);
      got.push_back(tok);
      if (step < want_lp.size()) lp_err = std::max(lp_err, std::fabs(log_softmax_at(row.data(), vocab, tok) - want_lp[step]));
      if (step + 1 == want_ids.size()) break;
      ForwardOutput o;
      model->forward({{{tok}, n + static_cast<int32_t>(step), block_ids, false}}, o);
      row = o.logits;
    }
    CHECK_MSG(got == want_ids, "%s: greedy output differs from transformers", name.c_str());
    CHECK_MSG(lp_err < 1e-3, "%s: greedy log-prob max abs err %g", name.c_str(), lp_err);
  }
}

}  // namespace

TEST_MAIN({
  const std::string root = check::repo_root + "/test/fixtures/models";
  int found = 0;
  const char* names[] = {"tiny-llama", "tiny-llama-sharded", "tiny-gpt2", "tiny-qwen3", "tiny-qwen3-bias", "tiny-phi3", "tiny-gemma",
                         "tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-mixtral",
                         // sliding windows, Gemma 2, longrope (make_window_fixtures.py)
                         "tiny-mistral-window", "tiny-qwen2-window", "tiny-gemma2", "tiny-phi3-longrope",
                         // FP8 checkpoints (issue 24): the CPU runs the dequantized weights, the references' W8A16
                         "tiny-llama-fp8-block", "tiny-llama-fp8-block128", "tiny-llama-fp8-ct-channel",
                         "tiny-llama-fp8-ct-tensor-static", "tiny-llama-fp8-modelopt"};
  const int total = static_cast<int>(sizeof(names) / sizeof(names[0]));
  int total_missing_extra = 0;
  for (const char* name : names) {
    const std::string dir = root + "/" + name;
    if (!check::exists(dir + "/reference.json")) {
      std::printf("missing %s: %s/reference.json not found\n", name, dir.c_str());
      continue;
    }
    ++found;
    try {
      check_fixture(dir, name);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", name, e.what());
    }
  }
  // --quantization fp8 of the float tiny-llama: per-channel FP8 weights, run dequantized on the CPU.
  if (check::exists(root + "/tiny-llama/reference-quantized-fp8.json")) {
    LoadOptions fp8;
    fp8.quantization = "fp8";
    try {
      check_fixture(root + "/tiny-llama", "tiny-llama --quantization fp8", "reference-quantized-fp8", fp8);
    } catch (const std::exception& e) {
      CHECK_MSG(false, "tiny-llama --quantization fp8: %s", e.what());
    }
  } else {
    ++total_missing_extra;
  }
  if ((found < total || total_missing_extra > 0) && check::failures == 0)
    return check::skip("%d of the %d fixtures missing under %s", total - found + total_missing_extra, total + 1,
                       root.c_str());
})
