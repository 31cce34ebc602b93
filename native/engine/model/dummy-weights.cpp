#include "model/dummy-weights.h"

#include "model/dummy-value.h"

namespace engine {

namespace {
// Global tensor ids: 1..3 for embeddings and head, 32 * (layer + 1) + k for layer tensors.
enum : uint32_t { kEmbed = 1, kPos = 2, kHead = 3 };
enum : uint32_t { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kQb = 8, kKb, kVb, kOb, kGateb, kUpb, kDownb };
uint32_t layer_tensor(int32_t layer, uint32_t k) { return 32u * static_cast<uint32_t>(layer + 1) + k; }
enum : uint32_t { kRouter = 16, kSharedGateW, kSharedGate, kSharedUp, kSharedDown };
// Experts' tensors: ids from 2^24 up, 4 per (layer, expert), clear of the layer tensors' 32 * (layer + 1) + k.
uint32_t expert_tensor(int32_t layer, int32_t expert, uint32_t k) {
  return (1u << 24) + (static_cast<uint32_t>(layer) * 4096u + static_cast<uint32_t>(expert)) * 4u + k;
}

DummyPart rows_part(uint32_t t, int64_t r0, int64_t r1, int64_t cols) { return {t, r0, r1 - r0, 0, cols, cols}; }
DummyPart cols_part(uint32_t t, int64_t rows, int64_t c0, int64_t c1, int64_t gcols) {
  return {t, 0, rows, c0, c1 - c0, gcols};
}
}  // namespace

DummyPlan dummy_plan(const ModelConfig& c, const DecoderSpec& spec, const ParallelLayout& pl) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim, V = c.vocab_size;
  const int64_t q = int64_t{c.num_heads} * hd;
  const int64_t q0 = pl.head_begin * hd, q1 = pl.head_end * hd;
  const int64_t k0 = pl.kv_head_begin * hd, k1 = pl.kv_head_end * hd;
  const bool rank0 = pl.shard.tp_rank == 0;
  DummyPlan p;
  auto vocab_rows = [&](uint32_t t) {
    DummyMatrix m{pl.local_vocab(), H, {}};
    const int64_t real = pl.local_real_vocab(V);
    if (real > 0) m.parts.push_back(rows_part(t, pl.vocab_begin, pl.vocab_begin + real, H));
    return m;
  };
  if (pl.first_stage()) {
    p.embed = vocab_rows(kEmbed);
    if (!spec.rope) p.pos_embed = DummyMatrix{c.max_position_embeddings, H, {rows_part(kPos, 0, c.max_position_embeddings, H)}};
  }
  const int64_t Il = pl.local_inter();
  for (int32_t l = pl.layer_begin; l < pl.layer_end; ++l) {
    auto t = [&](uint32_t k) { return layer_tensor(l, k); };
    DummyLayer d;
    // A gated MLP's columns [c0, c1) of intermediate size I: gate rows then up rows; down's matching columns.
    auto gated = [&](uint32_t gate, uint32_t up, uint32_t down, int64_t I, int64_t c0, int64_t c1) {
      return DummyExpert{DummyMatrix{2 * (c1 - c0), H, {rows_part(gate, c0, c1, H), rows_part(up, c0, c1, H)}},
                         DummyMatrix{H, c1 - c0, {cols_part(down, H, c0, c1, I)}}};
    };
    if (c.moe.sparse_layer(l)) {
      const MoeConfig& m = c.moe;
      d.moe.router = DummyMatrix{m.num_experts, H, {rows_part(t(kRouter), 0, m.num_experts, H)}};
      for (int32_t e = pl.expert_begin; e < pl.expert_end; ++e)
        d.moe.experts.push_back(gated(expert_tensor(l, e, 0), expert_tensor(l, e, 1), expert_tensor(l, e, 2),
                                      m.expert_inter, pl.expert_inter_begin, pl.expert_inter_end));
      if (m.shared_inter > 0) {
        d.moe.shared = gated(t(kSharedGate), t(kSharedUp), t(kSharedDown), m.shared_inter, pl.shared_inter_begin,
                             pl.shared_inter_end);
        d.moe.shared_gate = DummyMatrix{1, H, {rows_part(t(kSharedGateW), 0, 1, H)}};
      }
    }
    d.attn_norm = d.mlp_norm = DummyNorm{H, !spec.rms_norm};
    if (c.qk_norm) d.q_norm = d.k_norm = DummyNorm{c.head_dim, false};
    if (c.sandwich_norms) d.post_attn_norm = d.post_mlp_norm = DummyNorm{H, false};
    const int64_t qkv_out = (q1 - q0) + 2 * (k1 - k0);
    d.qkv.w = DummyMatrix{qkv_out, H, {rows_part(t(kQ), q0, q1, H), rows_part(t(kK), k0, k1, H), rows_part(t(kV), k0, k1, H)}};
    if (c.attention_bias)
      d.qkv.b = DummyMatrix{qkv_out, 1, {rows_part(t(kQb), q0, q1, 1), rows_part(t(kKb), k0, k1, 1), rows_part(t(kVb), k0, k1, 1)}};
    d.o.w = DummyMatrix{H, q1 - q0, {cols_part(t(kO), H, q0, q1, q)}};
    if (c.attention_out_bias && rank0) d.o.b = DummyMatrix{H, 1, {rows_part(t(kOb), 0, H, 1)}};
    if (!d.moe.experts.empty()) {
      // (no dense MLP in this layer)
    } else if (spec.gated_mlp) {
      d.up.w = DummyMatrix{2 * Il, H, {rows_part(t(kGate), pl.inter_begin, pl.inter_end, H), rows_part(t(kUp), pl.inter_begin, pl.inter_end, H)}};
      if (c.mlp_bias)
        d.up.b = DummyMatrix{2 * Il, 1, {rows_part(t(kGateb), pl.inter_begin, pl.inter_end, 1), rows_part(t(kUpb), pl.inter_begin, pl.inter_end, 1)}};
    } else {
      d.up.w = DummyMatrix{Il, H, {rows_part(t(kUp), pl.inter_begin, pl.inter_end, H)}};
      if (c.mlp_bias) d.up.b = DummyMatrix{Il, 1, {rows_part(t(kUpb), pl.inter_begin, pl.inter_end, 1)}};
    }
    if (d.moe.experts.empty()) d.down.w = DummyMatrix{H, Il, {cols_part(t(kDown), H, pl.inter_begin, pl.inter_end, I)}};
    if (d.moe.experts.empty() && c.mlp_bias && rank0) d.down.b = DummyMatrix{H, 1, {rows_part(t(kDownb), 0, H, 1)}};
    p.layers.push_back(d);
  }
  if (pl.last_stage()) {
    p.has_final_norm = true;
    p.final_norm = DummyNorm{H, !spec.rms_norm};
    // Tied heads read the embedding; a last stage without it holds its own copy of its vocab rows.
    if (!c.tie_word_embeddings) p.lm_head = vocab_rows(kHead);
    else if (!pl.first_stage()) p.lm_head = vocab_rows(kEmbed);
  }
  return p;
}

namespace {
std::vector<float> materialize(const DummyMatrix& m, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(m.out * m.in), 0.0f);
  int64_t row = 0;
  for (const DummyPart& part : m.parts) {
    for (int64_t r = 0; r < part.rows; ++r, ++row)
      for (int64_t col = 0; col < part.cols; ++col) {
        const uint64_t index = static_cast<uint64_t>((part.row0 + r) * part.global_cols + part.col0 + col);
        out[static_cast<size_t>(row * m.in + col)] = dummy_value(seed, part.tensor, index, kDummyScale);
      }
  }
  return out;
}

Linear materialize(const DummyLinear& l, uint64_t seed) {
  Linear out;
  out.out = l.w.out;
  out.in = l.w.in;
  out.w = materialize(l.w, seed);
  if (!l.b.empty()) out.b = materialize(l.b, seed);
  return out;
}

Linear materialize_matrix(const DummyMatrix& m, uint64_t seed) {
  Linear out;
  out.out = m.out;
  out.in = m.in;
  out.w = materialize(m, seed);
  return out;
}
Norm materialize(const DummyNorm& n) {
  Norm out;
  out.w.assign(static_cast<size_t>(n.dim), 1.0f);
  if (n.bias) out.b.assign(static_cast<size_t>(n.dim), 0.0f);
  return out;
}
}  // namespace

DecoderWeights materialize_dummy(const DummyPlan& p, uint64_t seed) {
  DecoderWeights w;
  if (!p.embed.empty()) w.embed = materialize(p.embed, seed);
  if (!p.pos_embed.empty()) w.pos_embed = materialize(p.pos_embed, seed);
  for (const DummyLayer& d : p.layers) {
    DecoderLayerWeights lw;
    lw.attn_norm = materialize(d.attn_norm);
    lw.mlp_norm = materialize(d.mlp_norm);
    if (d.q_norm.dim > 0) {
      lw.q_norm = materialize(d.q_norm);
      lw.k_norm = materialize(d.k_norm);
    }
    if (d.post_attn_norm.dim > 0) {
      lw.post_attn_norm = materialize(d.post_attn_norm);
      lw.post_mlp_norm = materialize(d.post_mlp_norm);
    }
    lw.qkv = materialize(d.qkv, seed);
    lw.o = materialize(d.o, seed);
    lw.up = materialize(d.up, seed);
    lw.down = materialize(d.down, seed);
    if (!d.moe.experts.empty()) {
      lw.moe.router = materialize_matrix(d.moe.router, seed);
      for (const DummyExpert& e : d.moe.experts)
        lw.moe.experts.push_back({materialize_matrix(e.up, seed), materialize_matrix(e.down, seed)});
      if (!d.moe.shared.up.empty()) {
        lw.moe.shared = {materialize_matrix(d.moe.shared.up, seed), materialize_matrix(d.moe.shared.down, seed)};
        lw.moe.shared_gate = materialize_matrix(d.moe.shared_gate, seed);
      }
    }
    w.layers.push_back(std::move(lw));
  }
  if (p.has_final_norm) w.final_norm = materialize(p.final_norm);
  if (!p.lm_head.empty()) w.lm_head = materialize(p.lm_head, seed);
  return w;
}

}  // namespace engine
