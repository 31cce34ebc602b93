#include "llama.h"

#include "decoder.h"
#include "errors.h"

namespace engine {

namespace {
// Reads [q; k; v] (and their biases) into one fused projection so attention inputs take a single GEMM.
Linear read_qkv(WeightReader& r, const std::string& p, const ModelConfig& c) {
  const int64_t H = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  Linear l;
  l.out = q + 2 * kv;
  l.in = H;
  l.w.resize(l.out * l.in);
  r.read_into(p + "q_proj.weight", {q, H}, l.w.data());
  r.read_into(p + "k_proj.weight", {kv, H}, l.w.data() + q * H);
  r.read_into(p + "v_proj.weight", {kv, H}, l.w.data() + (q + kv) * H);
  if (c.attention_bias) {
    l.b.resize(l.out);
    r.read_into(p + "q_proj.bias", {q}, l.b.data());
    r.read_into(p + "k_proj.bias", {kv}, l.b.data() + q);
    r.read_into(p + "v_proj.bias", {kv}, l.b.data() + q + kv);
  }
  return l;
}

Linear read_linear(WeightReader& r, const std::string& name, int64_t out, int64_t in, bool bias) {
  Linear l;
  l.out = out;
  l.in = in;
  l.w = r.read(name + ".weight", {out, in});
  if (bias) l.b = r.read(name + ".bias", {out});
  return l;
}
}  // namespace

std::unique_ptr<Model> load_llama(const ModelConfig& c, WeightReader& r, int32_t num_threads) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim;
  DecoderSpec spec;
  spec.rms_norm = true;
  spec.rope = true;
  spec.gated_mlp = true;
  spec.act = cpu::parse_activation(c.hidden_act);

  DecoderWeights w;
  w.embed = r.read("model.embed_tokens.weight", {V, H});
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayerWeights lw;
    lw.attn_norm.w = r.read(p + "input_layernorm.weight", {H});
    lw.qkv = read_qkv(r, p + "self_attn.", c);
    lw.o = read_linear(r, p + "self_attn.o_proj", H, q, c.attention_out_bias);
    lw.mlp_norm.w = r.read(p + "post_attention_layernorm.weight", {H});
    // gate rows then up rows: one GEMM yields both halves of SwiGLU.
    lw.up.out = 2 * I;
    lw.up.in = H;
    lw.up.w.resize(2 * I * H);
    r.read_into(p + "mlp.gate_proj.weight", {I, H}, lw.up.w.data());
    r.read_into(p + "mlp.up_proj.weight", {I, H}, lw.up.w.data() + I * H);
    if (c.mlp_bias) {
      lw.up.b.resize(2 * I);
      r.read_into(p + "mlp.gate_proj.bias", {I}, lw.up.b.data());
      r.read_into(p + "mlp.up_proj.bias", {I}, lw.up.b.data() + I);
    }
    lw.down = read_linear(r, p + "mlp.down_proj", H, I, c.mlp_bias);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm.w = r.read("model.norm.weight", {H});
  if (!c.tie_word_embeddings && r.has("lm_head.weight")) w.lm_head = r.read("lm_head.weight", {V, H});
  r.finish();
  return std::make_unique<DecoderModel>(c, spec, std::move(w), num_threads);
}

}  // namespace engine
