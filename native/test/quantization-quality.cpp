// How much a quantized model loses against the same checkpoint unquantized, teacher-forced on held-out text: mean
// next-token loss (perplexity) of both and the share of positions where their top-1 tokens agree. Issue 24's yardstick
// for --quantization fp8 of the bundled model (perplexity within 1%, agreement >= 99%), on any backend: on CPU the FP8
// model runs W8A16 (the dequantized weights), on CUDA the FP8 GEMMs with quantized activations.
// usage: quantization-quality <model dir> <ids.json> [--device cpu|cuda] [--quantization fp8] [--seq 256]
//        [--windows 64] [--dtype bfloat16] [--base-device cpu|cuda] [--base-quantization fp8]
//        [--max-ppl-increase PCT] [--min-agreement PCT] [--kv-cache-dtype auto|fp8]
// --kv-cache-dtype fp8 stores the quantized model's K/V as e4m3 (with --quantization "" the KV cache alone is
// compared: FP8 KV against the model's own precision).
// --base-device cpu --quantization "" compares the device's 16-bit run with the CPU's fp32 one: the noise floor
// that any quantized run's agreement should be read against.
// With --max-ppl-increase / --min-agreement it is a check: exit 1 when the quantized model is worse than that.
// ids.json: {"input_ids": [...]} (test/fixtures/quality/brown-heldout-ids.json: the bundled model's held-out text).
// Prints one line per model and a last line "quality: ppl <base> -> <quantized> (<+x.xx%>), top-1 agreement <y>%".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "errors.h"
#include "loading/json.h"
#include "model/model.h"

using namespace engine;

namespace {

struct Pass {
  double nll = 0;               // summed over scored positions
  int64_t positions = 0;
  std::vector<int32_t> top1;    // per scored position
};

Pass score(Model& model, const std::vector<int32_t>& ids, int32_t seq, int32_t windows) {
  const int32_t vocab = model.config().vocab_size;
  const int32_t tpb = 16;
  const int32_t blocks = (seq + tpb - 1) / tpb;
  model.allocate_kv(blocks, tpb);
  std::vector<int32_t> block_ids(blocks);
  for (int32_t i = 0; i < blocks; ++i) block_ids[i] = i;
  Pass p;
  for (int32_t w = 0; w < windows; ++w) {
    const size_t start = static_cast<size_t>(w) * seq;
    if (start + seq + 1 > ids.size()) break;
    SequenceChunk chunk;
    chunk.tokens.assign(ids.begin() + start, ids.begin() + start + seq);
    chunk.block_ids = block_ids;
    chunk.all_logits = true;
    ForwardOutput out;
    model.forward({chunk}, out);
    for (int32_t t = 0; t < seq; ++t) {
      const float* row = out.logits.data() + static_cast<size_t>(t) * vocab;
      const int32_t target = ids[start + t + 1];
      double m = *std::max_element(row, row + vocab), z = 0;
      for (int32_t j = 0; j < vocab; ++j) z += std::exp(static_cast<double>(row[j]) - m);
      p.nll += -(row[target] - m - std::log(z));
      p.top1.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
      ++p.positions;
    }
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: quantization-quality <model dir> <ids.json> [--device cpu|cuda] [--quantization fp8] "
                         "[--seq 256] [--windows 64] [--dtype bfloat16]\n");
    return 2;
  }
  const std::string dir = argv[1], ids_path = argv[2];
  std::string device = "cpu", quantization = "fp8", dtype = "auto", base_device, base_quantization, kv_cache_dtype = "auto";
  int32_t seq = 256, windows = 64;
  double max_ppl_increase = -1, min_agreement = -1;  // percent; < 0: not checked
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") device = v;
    else if (k == "--quantization") quantization = v;
    else if (k == "--seq") seq = std::stoi(v);
    else if (k == "--windows") windows = std::stoi(v);
    else if (k == "--dtype") dtype = v;
    else if (k == "--base-device") base_device = v;
    else if (k == "--base-quantization") base_quantization = v;
    else if (k == "--max-ppl-increase") max_ppl_increase = std::stod(v);
    else if (k == "--min-agreement") min_agreement = std::stod(v);
    else if (k == "--kv-cache-dtype") kv_cache_dtype = v;
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  try {
    std::vector<int32_t> ids;
    const json::Value doc = json::parse_file(ids_path);
    const json::Value* list = doc.find("input_ids");
    if (!list) throw EngineError(ErrorCode::bad_checkpoint, ids_path + " has no \"input_ids\"");
    for (const auto& v : list->as_array()) ids.push_back(static_cast<int32_t>(v.as_int64()));
    LoadOptions quant;
    quant.device = device == "cuda" ? Device::cuda : Device::cpu;
    quant.dtype = dtype;
    quant.max_num_tokens = std::max(seq, 256);
    quant.max_batch_size = 1;
    quant.quantization = quantization;
    LoadOptions base = quant;
    base.quantization = base_quantization;
    quant.kv_cache_dtype = kv_cache_dtype;
    if (!base_device.empty()) base.device = base_device == "cuda" ? Device::cuda : Device::cpu;
    if (base.device == Device::cpu) base.dtype = "auto";

    Pass a, b;
    {
      auto model = load_model(dir, base);
      a = score(*model, ids, seq, windows);
    }
    {
      auto model = load_model(dir, quant);
      b = score(*model, ids, seq, windows);
    }
    int64_t agree = 0;
    for (size_t i = 0; i < a.top1.size() && i < b.top1.size(); ++i) agree += a.top1[i] == b.top1[i];
    const double la = a.nll / static_cast<double>(a.positions), lb = b.nll / static_cast<double>(b.positions);
    const double pa = std::exp(la), pb = std::exp(lb);
    std::printf("base      (%s, %s): %lld positions, mean loss %.5f, perplexity %.4f\n",
                base_device.empty() ? device.c_str() : base_device.c_str(), base_quantization.empty() ? dtype.c_str() : base_quantization.c_str(),
                static_cast<long long>(a.positions), la, pa);
    std::printf("quantized (%s, %s, KV %s): %lld positions, mean loss %.5f, perplexity %.4f\n", device.c_str(),
                quantization.empty() ? dtype.c_str() : quantization.c_str(), kv_cache_dtype.c_str(),
                static_cast<long long>(b.positions), lb, pb);
    std::printf("quality: ppl %.4f -> %.4f (%+.2f%%), top-1 agreement %.2f%% of %lld positions\n", pa, pb,
                100.0 * (pb / pa - 1.0), 100.0 * static_cast<double>(agree) / static_cast<double>(a.positions),
                static_cast<long long>(a.positions));
    const double increase = 100.0 * (pb / pa - 1.0);
    const double agreement = 100.0 * static_cast<double>(agree) / static_cast<double>(a.positions);
    int rc = 0;
    if (max_ppl_increase >= 0 && increase > max_ppl_increase) {
      std::printf("FAIL: perplexity rose %.2f%% > %.2f%%\n", increase, max_ppl_increase);
      rc = 1;
    }
    if (min_agreement >= 0 && agreement < min_agreement) {
      std::printf("FAIL: top-1 agreement %.2f%% < %.2f%%\n", agreement, min_agreement);
      rc = 1;
    }
    if (a.positions == 0) {
      std::printf("FAIL: no window of %d tokens in %s\n", seq, ids_path.c_str());
      rc = 1;
    }
    return rc;
  } catch (const EngineError& e) {
    std::fprintf(stderr, "quantization-quality: %s\n", e.what());
    return 1;
  }
}
