#include "model/gpt2.h"

#include <cstring>

#include "errors.h"

namespace engine {

namespace {
TensorSlice rows_of(int64_t begin, int64_t end) { return TensorSlice{0, begin, end}; }
TensorSlice cols_of(int64_t begin, int64_t end) { return TensorSlice{1, begin, end}; }

// Conv1D keeps weights as [in, out]; they are transposed once at load so every projection shares one GEMM form.
// Column parallel: output columns [begin, end) of the weight and of the bias.
Linear read_conv1d_columns(WeightReader& r, const std::string& name, int64_t in, int64_t out, int64_t begin,
                           int64_t end) {
  Linear l;
  l.in = in;
  l.out = end - begin;
  l.w = r.read_transposed(name + ".weight", in, out, cols_of(begin, end));
  l.b = r.read(name + ".bias", {out}, rows_of(begin, end));
  return l;
}

// Row parallel: input rows [begin, end) of the stored weight; the whole bias on tp rank 0 only (the all-reduce
// of the partial products adds it once).
Linear read_conv1d_rows(WeightReader& r, const std::string& name, int64_t in, int64_t out, int64_t begin,
                        int64_t end, bool bias_here) {
  Linear l;
  l.in = end - begin;
  l.out = out;
  l.w = r.read_transposed(name + ".weight", in, out, rows_of(begin, end));
  if (bias_here) l.b = r.read(name + ".bias", {out});
  return l;
}

// c_attn is one Conv1D [hidden, 3 * hidden] whose output columns are q | k | v, heads contiguous within each: this
// rank's heads are one column range in each third.
Linear read_c_attn(WeightReader& r, const std::string& name, const ModelConfig& c, const ParallelLayout& pl) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t part[3][2] = {{pl.head_begin * hd, pl.head_end * hd},
                              {pl.kv_head_begin * hd, pl.kv_head_end * hd},
                              {pl.kv_head_begin * hd, pl.kv_head_end * hd}};
  Linear l;
  l.in = H;
  for (const auto& p : part) l.out += p[1] - p[0];
  l.w.resize(l.out * l.in);
  l.b.resize(l.out);
  int64_t row = 0;
  for (int k = 0; k < 3; ++k) {
    const int64_t b = k * H + part[k][0], e = k * H + part[k][1];
    const std::vector<float> wk = r.read_transposed(name + ".weight", H, 3 * H, cols_of(b, e));
    std::memcpy(l.w.data() + row * H, wk.data(), sizeof(float) * wk.size());
    r.read_into(name + ".bias", {3 * H}, l.b.data() + row, rows_of(b, e));
    row += e - b;
  }
  return l;
}

Norm read_layer_norm(WeightReader& r, const std::string& name, int64_t dim) {
  Norm n;
  n.w = r.read(name + ".weight", {dim});
  n.b = r.read(name + ".bias", {dim});
  return n;
}
}  // namespace

DecoderSpec gpt2_spec(const ModelConfig& c) {
  DecoderSpec spec;
  spec.rms_norm = false;
  spec.rope = false;
  spec.gated_mlp = false;
  spec.act = cpu::parse_activation(c.hidden_act);
  return spec;
}

DecoderWeights read_gpt2_weights(const ModelConfig& c, WeightReader& r, const ParallelLayout& pl) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, P = c.max_position_embeddings;
  const int64_t hd = c.head_dim;
  const bool bias_here = pl.shard.tp_rank == 0;
  const std::string pre = r.has("transformer.wte.weight") ? "transformer." : "";

  DecoderWeights w;
  if (pl.first_stage()) {
    w.embed = r.read_rows_padded(pre + "wte.weight", V, H, pl.vocab_begin, pl.vocab_end);
    w.pos_embed = r.read(pre + "wpe.weight", {P, H});
  }
  for (int32_t i = pl.layer_begin; i < pl.layer_end; ++i) {
    const std::string p = pre + "h." + std::to_string(i) + ".";
    DecoderLayerWeights lw;
    lw.attn_norm = read_layer_norm(r, p + "ln_1", H);
    lw.qkv = read_c_attn(r, p + "attn.c_attn", c, pl);
    lw.o = read_conv1d_rows(r, p + "attn.c_proj", H, H, pl.head_begin * hd, pl.head_end * hd, bias_here);
    lw.mlp_norm = read_layer_norm(r, p + "ln_2", H);
    lw.up = read_conv1d_columns(r, p + "mlp.c_fc", H, I, pl.inter_begin, pl.inter_end);
    lw.down = read_conv1d_rows(r, p + "mlp.c_proj", I, H, pl.inter_begin, pl.inter_end, bias_here);
    w.layers.push_back(std::move(lw));
  }
  if (pl.last_stage()) {
    w.final_norm = read_layer_norm(r, pre + "ln_f", H);
    // The head is tied to wte; a last stage that does not embed holds its own copy of its vocab rows.
    if (!pl.first_stage()) w.lm_head = r.read_rows_padded(pre + "wte.weight", V, H, pl.vocab_begin, pl.vocab_end);
  }
  r.finish();
  return w;
}

}  // namespace engine
