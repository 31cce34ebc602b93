#include "parallel/pp-partition.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "errors.h"

namespace engine {
namespace {

[[noreturn]] void fail(const std::string& spec, const std::string& why) {
  throw EngineError(ErrorCode::invalid_argument, "--pp-layers '" + spec + "': " + why);
}

std::vector<int32_t> even(int32_t layers, int32_t pp) {
  std::vector<int32_t> out(static_cast<size_t>(pp), layers / pp);
  for (int32_t st = 0; st < layers % pp; ++st) ++out[static_cast<size_t>(st)];
  return out;
}

std::vector<int32_t> parse_list(const std::string& spec, int32_t layers, int32_t pp) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos)
      fail(spec, "expected 'balanced' or a comma-separated list of layer counts, one per stage");
    out.push_back(std::stoi(item));
    at = comma + 1;
  }
  if (static_cast<int32_t>(out.size()) != pp)
    fail(spec, "has " + std::to_string(out.size()) + " stage(s), but pp is " + std::to_string(pp));
  for (int32_t n : out)
    if (n < 1) fail(spec, "every stage needs at least one layer");
  const int64_t sum = std::accumulate(out.begin(), out.end(), int64_t{0});
  if (sum != layers) fail(spec, "adds up to " + std::to_string(sum) + " layers, but the model has " + std::to_string(layers));
  return out;
}

// Contiguous split of the layers into pp stages of at least one layer, the last one also running the head,
// minimising the heaviest stage; among equal splits, earlier stages take more (as the even split does).
std::vector<int32_t> balanced(const ModelConfig& c, int32_t pp) {
  const int32_t L = c.num_layers;
  std::vector<int64_t> prefix(static_cast<size_t>(L) + 1, 0);
  for (int32_t l = 0; l < L; ++l) prefix[static_cast<size_t>(l) + 1] = prefix[static_cast<size_t>(l)] + layer_work(c, l);
  // A prompt token needs no logits row, a generated one does: the head counts for half the tokens, as with as many
  // generated as prompt tokens (the 128/128 shape of TensorRT-LLM's benchmarks). Weighing it fully would suit
  // decode alone and starve stage 0 of balance under long prompts.
  const int64_t head = head_work(c) / 2;
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[k][j]: the lightest heaviest stage splitting layers [0, j) into k stages; cut[k][j]: where the k-th begins.
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(pp) + 1, std::vector<int64_t>(static_cast<size_t>(L) + 1, kInf));
  std::vector<std::vector<int32_t>> cut(static_cast<size_t>(pp) + 1, std::vector<int32_t>(static_cast<size_t>(L) + 1, 0));
  best[0][0] = 0;
  for (int32_t k = 1; k <= pp; ++k)
    for (int32_t j = k; j <= L; ++j)
      for (int32_t i = j - 1; i >= k - 1; --i) {  // the latest start first: ties leave earlier stages the larger
        const int64_t prev = best[static_cast<size_t>(k) - 1][static_cast<size_t>(i)];
        if (prev == kInf) continue;
        int64_t stage = prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)];
        if (k == pp && j == L) stage += head;
        const int64_t worst = std::max(prev, stage);
        if (worst < best[static_cast<size_t>(k)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(j)] = worst;
          cut[static_cast<size_t>(k)][static_cast<size_t>(j)] = i;
        }
      }
  std::vector<int32_t> out(static_cast<size_t>(pp));
  int32_t j = L;
  for (int32_t k = pp; k >= 1; --k) {
    const int32_t i = cut[static_cast<size_t>(k)][static_cast<size_t>(j)];
    out[static_cast<size_t>(k) - 1] = j - i;
    j = i;
  }
  return out;
}

}  // namespace

int64_t layer_work(const ModelConfig& c, int32_t layer) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t attention = H * hd * (2 * static_cast<int64_t>(c.num_heads) + 2 * static_cast<int64_t>(c.num_kv_heads));
  const int64_t mats = c.architecture == Architecture::gpt2 ? 2 : 3;  // GPT-2's MLP is not gated
  int64_t mlp = mats * H * c.intermediate_size;
  if (c.moe.sparse_layer(layer)) {
    mlp = static_cast<int64_t>(c.moe.top_k) * 3 * H * c.moe.expert_inter + 3 * H * c.moe.shared_inter +
          H * c.moe.num_experts;
  }
  return attention + mlp;
}

int64_t head_work(const ModelConfig& c) { return static_cast<int64_t>(c.vocab_size) * c.hidden_size; }

std::vector<int32_t> pp_stage_layers(const ModelConfig& c, int32_t pp, const std::string& spec) {
  if (spec.empty()) return even(c.num_layers, pp);
  if (spec == "balanced") return balanced(c, pp);
  return parse_list(spec, c.num_layers, pp);
}

}  // namespace engine
