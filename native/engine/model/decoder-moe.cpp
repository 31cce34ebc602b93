// The mixture-of-experts MLP of DecoderModel (decoder.h): each expert runs one GEMM pair over only the rows routed
// to it (gathered, so the GEMMs are dense), and the weighted outputs are scattered back onto the rank's partial sum.
#include <cmath>
#include <cstring>

#include "cpu/gemm.h"
#include "model/decoder.h"
#include "model/scratch.h"

namespace engine {

namespace {
const std::vector<int32_t> kEveryRow;
}  // namespace

void DecoderModel::expert_mlp(const ExpertWeights& e, const float* xn, const std::vector<int32_t>& rows_of,
                              const std::vector<float>& weights, float* out) {
  const int64_t H = config_.hidden_size, cols = e.down.in, n = static_cast<int64_t>(weights.size());
  if (n == 0) return;
  const float* in = xn;
  if (!rows_of.empty()) {
    float* gathered = grow(expert_x_, static_cast<size_t>(n * H));
    for (int64_t i = 0; i < n; ++i) std::memcpy(gathered + i * H, xn + int64_t{rows_of[i]} * H, sizeof(float) * H);
    in = gathered;
  }
  float* h = grow(expert_h_, static_cast<size_t>(n * 2 * cols));
  float* act = grow(expert_act_, static_cast<size_t>(n * cols));
  float* y = grow(expert_y_, static_cast<size_t>(n * H));
  linear(e.up, in, n, h, false);
  cpu::gated_activate(h, act, n, cols, spec_.act);
  linear(e.down, act, n, y, false);
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + (rows_of.empty() ? i : int64_t{rows_of[i]}) * H;
    const float w = weights[i];
    const float* yi = y + i * H;
    for (int64_t j = 0; j < H; ++j) o[j] += w * yi[j];
  }
}

void DecoderModel::moe_block(const DecoderLayerWeights& lw, float* x, int64_t rows) {
  const MoeConfig& moe = config_.moe;
  const int64_t H = config_.hidden_size;
  const size_t n = static_cast<size_t>(rows * H);
  float* xn = grow(xn_, n);
  norm(lw.mlp_norm, x, xn, rows);
  float* logits = grow(router_logits_, static_cast<size_t>(rows * moe.num_experts));
  linear(lw.moe.router, xn, rows, logits, false);
  route_tokens(logits, rows, moe.num_experts, moe.top_k, moe.norm_topk_prob, layout_.expert_begin,
               layout_.expert_end, routes_);
  // As in linear_row_parallel: tp rank 0 sums onto the residual stream, the others contribute their partial sums,
  // so one all-reduce yields x + every expert's (and the shared expert's) output.
  float* out = grow(moe_out_, n);
  if (tp_.rank() == 0)
    std::memcpy(out, x, sizeof(float) * n);
  else
    std::memset(out, 0, sizeof(float) * n);
  for (size_t e = 0; e < lw.moe.experts.size(); ++e)
    expert_mlp(lw.moe.experts[e], xn, routes_[e].rows, routes_[e].weights, out);
  if (!lw.moe.shared.down.w.empty()) {
    // Qwen2-MoE: the shared expert's output times sigmoid(shared_expert_gate . xn), per row. The gate is whole on
    // every rank and scales this rank's partial columns, which is the same as scaling their sum.
    shared_weights_.resize(static_cast<size_t>(rows));
    linear(lw.moe.shared_gate, xn, rows, shared_weights_.data(), false);
    for (float& g : shared_weights_) g = 1.0f / (1.0f + std::exp(-g));
    expert_mlp(lw.moe.shared, xn, kEveryRow, shared_weights_, out);
  }
  if (tp_.size() > 1) all_reduce_tp(out, n);
  std::memcpy(x, out, sizeof(float) * n);
}

}  // namespace engine
