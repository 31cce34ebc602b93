#include "model/moe-weights.h"

namespace engine {

namespace {
// Columns [begin, end) of a gated MLP of intermediate size I: its gate and up rows stacked into one [2 * cols, H]
// projection (one GEMM for both halves), its down projection's matching input columns.
ExpertWeights read_gated(WeightReader& r, const std::string& gate, const std::string& up, const std::string& down,
                         int64_t H, int64_t I, int64_t begin, int64_t end) {
  const int64_t cols = end - begin;
  const TensorSlice rows{0, begin, end};
  ExpertWeights e;
  e.up.out = 2 * cols;
  e.up.in = H;
  e.up.w.resize(static_cast<size_t>(2 * cols * H));
  r.read_into(gate, {I, H}, e.up.w.data(), rows);
  r.read_into(up, {I, H}, e.up.w.data() + cols * H, rows);
  e.up.fp8 = r.fp8_rows({{gate, {I, H}, rows}, {up, {I, H}, rows}});
  e.down.out = H;
  e.down.in = cols;
  e.down.w = r.read(down, {H, I}, TensorSlice{1, begin, end});
  e.down.fp8 = r.fp8_rows({{down, {H, I}, TensorSlice{1, begin, end}}});
  return e;
}

Linear read_whole(WeightReader& r, const std::string& name, int64_t out, int64_t in) {
  Linear l;
  l.out = out;
  l.in = in;
  l.w = r.read(name, {out, in});
  return l;
}
}  // namespace

MoeWeights read_moe_weights(WeightReader& r, const std::string& layer, const ModelConfig& c, const ParallelLayout& pl) {
  const MoeConfig& m = c.moe;
  const int64_t H = c.hidden_size, I = m.expert_inter;
  const bool mixtral = m.names == MoeConfig::Names::mixtral;
  const std::string p = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  MoeWeights w;
  w.router = read_whole(r, p + "gate.weight", m.num_experts, H);
  for (int32_t e = pl.expert_begin; e < pl.expert_end; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    if (mixtral)
      w.experts.push_back(read_gated(r, x + "w1.weight", x + "w3.weight", x + "w2.weight", H, I,
                                     pl.expert_inter_begin, pl.expert_inter_end));
    else
      w.experts.push_back(read_gated(r, x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight", H, I,
                                     pl.expert_inter_begin, pl.expert_inter_end));
  }
  if (m.shared_inter > 0) {
    const std::string s = p + "shared_expert.";
    w.shared = read_gated(r, s + "gate_proj.weight", s + "up_proj.weight", s + "down_proj.weight", H, m.shared_inter,
                          pl.shared_inter_begin, pl.shared_inter_end);
    w.shared_gate = read_whole(r, p + "shared_expert_gate.weight", 1, H);
  }
  return w;
}

}  // namespace engine
