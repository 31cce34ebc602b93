#include "model/llama.h"

#include "errors.h"
#include "model/moe-weights.h"

namespace engine {

namespace {
TensorSlice rows_of(int64_t begin, int64_t end) { return TensorSlice{0, begin, end}; }
TensorSlice cols_of(int64_t begin, int64_t end) { return TensorSlice{1, begin, end}; }

// Gemma's RMSNorm scales by (1 + weight): folded into the weight once here, so every backend runs a plain RMSNorm.
void plus_one(std::vector<float>& w) {
  for (float& x : w) x += 1.0f;
}

// Reads this rank's [q; k; v] rows (its heads, its kv heads) and biases into one fused projection so attention
// inputs take a single GEMM. H: the input width (the hidden size; twice it in EAGLE-3's layer).
Linear read_qkv(WeightReader& r, const std::string& p, const ModelConfig& c, const ParallelLayout& pl, int64_t H) {
  const int64_t hd = c.head_dim;
  const int64_t q = int64_t{c.num_heads} * hd, kv = int64_t{c.num_kv_heads} * hd;
  const TensorSlice qs = rows_of(pl.head_begin * hd, pl.head_end * hd);
  const TensorSlice kvs = rows_of(pl.kv_head_begin * hd, pl.kv_head_end * hd);
  const int64_t ql = qs.end - qs.begin, kvl = kvs.end - kvs.begin;
  Linear l;
  l.out = ql + 2 * kvl;
  l.in = H;
  l.w.resize(l.out * l.in);
  if (c.fused_qkv) {
    // Phi-3's qkv_proj: [q; k; v] rows of one tensor, each part sliced as the separate tensors would be.
    const std::string name = p + "qkv_proj.weight";
    const std::vector<int64_t> shape{q + 2 * kv, H};
    const TensorSlice ks = rows_of(q + kvs.begin, q + kvs.end), vs = rows_of(q + kv + kvs.begin, q + kv + kvs.end);
    r.read_into(name, shape, l.w.data(), qs);
    r.read_into(name, shape, l.w.data() + ql * H, ks);
    r.read_into(name, shape, l.w.data() + (ql + kvl) * H, vs);
    l.fp8 = r.fp8_rows({{name, shape, qs}, {name, shape, ks}, {name, shape, vs}});
    return l;  // (no biases: model-config refuses them with fused projections)
  }
  r.read_into(p + "q_proj.weight", {q, H}, l.w.data(), qs);
  r.read_into(p + "k_proj.weight", {kv, H}, l.w.data() + ql * H, kvs);
  r.read_into(p + "v_proj.weight", {kv, H}, l.w.data() + (ql + kvl) * H, kvs);
  l.fp8 = r.fp8_rows({{p + "q_proj.weight", {q, H}, qs}, {p + "k_proj.weight", {kv, H}, kvs},
                      {p + "v_proj.weight", {kv, H}, kvs}});
  if (c.attention_bias) {
    l.b.resize(l.out);
    r.read_into(p + "q_proj.bias", {q}, l.b.data(), qs);
    r.read_into(p + "k_proj.bias", {kv}, l.b.data() + ql, kvs);
    r.read_into(p + "v_proj.bias", {kv}, l.b.data() + ql + kvl, kvs);
  }
  return l;
}

// Row parallel: input columns [begin, end) of an [out, in] weight. The bias is whole and held by tp rank 0 only,
// so the all-reduce that sums the partial products adds it exactly once.
Linear read_row_parallel(WeightReader& r, const std::string& name, int64_t out, int64_t in, bool bias, int64_t begin,
                         int64_t end, bool bias_here) {
  Linear l;
  l.out = out;
  l.in = end - begin;
  l.w = r.read(name + ".weight", {out, in}, cols_of(begin, end));
  l.fp8 = r.fp8_rows({{name + ".weight", {out, in}, cols_of(begin, end)}});
  if (bias && bias_here) l.b = r.read(name + ".bias", {out});
  return l;
}
}  // namespace

DecoderSpec llama_spec(const ModelConfig& c) {
  DecoderSpec spec;
  spec.rms_norm = true;
  spec.rope = true;
  spec.gated_mlp = true;
  spec.act = cpu::parse_activation(c.hidden_act);
  return spec;
}

DecoderWeights read_llama_weights(const ModelConfig& c, WeightReader& r, const ParallelLayout& pl,
                                  const LlamaTensors& names) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t q = int64_t{c.num_heads} * hd;
  const bool bias_here = pl.shard.tp_rank == 0;
  DecoderWeights w;
  if (pl.first_stage() && !names.eagle)
    w.embed = r.read_rows_padded("model.embed_tokens.weight", V, H, pl.vocab_begin, pl.vocab_end);
  for (int32_t i = pl.layer_begin; i < pl.layer_end; ++i) {
    const std::string p = names.eagle3 ? names.prefix + names.layer
                          : (names.eagle ? names.prefix : std::string("model.")) + "layers." + std::to_string(i) + ".";
    DecoderLayerWeights lw;
    // (EAGLE's first layer takes fc's output as it is: no input norm; EAGLE-3's norms the embedding with it)
    if (!names.eagle || i > 0 || names.eagle3) lw.attn_norm.w = r.read(p + "input_layernorm.weight", {H});
    if (names.eagle3) lw.hidden_norm.w = r.read(p + "hidden_norm.weight", {H});
    lw.qkv = read_qkv(r, p + "self_attn.", c, pl, names.eagle3 ? 2 * H : H);
    if (c.qk_norm) {
      lw.q_norm.w = r.read(p + "self_attn.q_norm.weight", {hd});
      lw.k_norm.w = r.read(p + "self_attn.k_norm.weight", {hd});
    }
    lw.o = read_row_parallel(r, p + "self_attn.o_proj", H, q, c.attention_out_bias, pl.head_begin * hd,
                             pl.head_end * hd, bias_here);
    if (c.sandwich_norms) {  // Gemma 2: post_attention_layernorm norms the attention output itself
      lw.post_attn_norm.w = r.read(p + "post_attention_layernorm.weight", {H});
      lw.mlp_norm.w = r.read(p + "pre_feedforward_layernorm.weight", {H});
      lw.post_mlp_norm.w = r.read(p + "post_feedforward_layernorm.weight", {H});
    } else {
      lw.mlp_norm.w = r.read(p + "post_attention_layernorm.weight", {H});
    }
    if (c.norm_plus_one)
      for (Norm* n : {&lw.attn_norm, &lw.mlp_norm, &lw.post_attn_norm, &lw.post_mlp_norm}) plus_one(n->w);
    if (c.moe.sparse_layer(i)) {
      lw.moe = read_moe_weights(r, p, c, pl);
      w.layers.push_back(std::move(lw));
      continue;
    }
    // This rank's gate rows then its up rows: one GEMM yields both halves of SwiGLU for its columns.
    const int64_t Il = pl.local_inter();
    const TensorSlice is = rows_of(pl.inter_begin, pl.inter_end);
    lw.up.out = 2 * Il;
    lw.up.in = H;
    lw.up.w.resize(2 * Il * H);
    if (c.fused_gate_up) {
      // Phi-3's gate_up_proj: [gate; up] rows of one tensor.
      const std::string name = p + "mlp.gate_up_proj.weight";
      const TensorSlice us = rows_of(I + pl.inter_begin, I + pl.inter_end);
      r.read_into(name, {2 * I, H}, lw.up.w.data(), is);
      r.read_into(name, {2 * I, H}, lw.up.w.data() + Il * H, us);
      lw.up.fp8 = r.fp8_rows({{name, {2 * I, H}, is}, {name, {2 * I, H}, us}});
    } else {
      r.read_into(p + "mlp.gate_proj.weight", {I, H}, lw.up.w.data(), is);
      r.read_into(p + "mlp.up_proj.weight", {I, H}, lw.up.w.data() + Il * H, is);
      lw.up.fp8 = r.fp8_rows({{p + "mlp.gate_proj.weight", {I, H}, is}, {p + "mlp.up_proj.weight", {I, H}, is}});
    }
    if (c.mlp_bias) {
      lw.up.b.resize(2 * Il);
      r.read_into(p + "mlp.gate_proj.bias", {I}, lw.up.b.data(), is);
      r.read_into(p + "mlp.up_proj.bias", {I}, lw.up.b.data() + Il, is);
    }
    lw.down = read_row_parallel(r, p + "mlp.down_proj", H, I, c.mlp_bias, pl.inter_begin, pl.inter_end, bias_here);
    w.layers.push_back(std::move(lw));
  }
  if (pl.last_stage() && !names.eagle) {
    w.final_norm.w = r.read("model.norm.weight", {H});
    if (c.norm_plus_one) plus_one(w.final_norm.w);
    const bool tied = c.tie_word_embeddings || !r.has("lm_head.weight");
    // Tied and on a stage without the embedding: the head is this stage's own copy of the embedding rows.
    if (!tied)
      w.lm_head = r.read_rows_padded("lm_head.weight", V, H, pl.vocab_begin, pl.vocab_end);
    else if (!pl.first_stage())
      w.lm_head = r.read_rows_padded("model.embed_tokens.weight", V, H, pl.vocab_begin, pl.vocab_end);
  }
  r.finish();
  return w;
}

}  // namespace engine
