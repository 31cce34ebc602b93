#include "gpt2.h"

#include "decoder.h"
#include "errors.h"

namespace engine {

namespace {
// Conv1D keeps weights as [in, out]; they are transposed once at load so every projection shares one GEMM form.
Linear read_conv1d(WeightReader& r, const std::string& name, int64_t in, int64_t out) {
  Linear l;
  l.in = in;
  l.out = out;
  l.w = r.read_transposed(name + ".weight", in, out);
  l.b = r.read(name + ".bias", {out});
  return l;
}

Norm read_layer_norm(WeightReader& r, const std::string& name, int64_t dim) {
  Norm n;
  n.w = r.read(name + ".weight", {dim});
  n.b = r.read(name + ".bias", {dim});
  return n;
}
}  // namespace

std::unique_ptr<Model> load_gpt2(const ModelConfig& c, WeightReader& r, int32_t num_threads) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, P = c.max_position_embeddings;
  const std::string pre = r.has("transformer.wte.weight") ? "transformer." : "";
  DecoderSpec spec;
  spec.rms_norm = false;
  spec.rope = false;
  spec.gated_mlp = false;
  spec.act = cpu::parse_activation(c.hidden_act);

  DecoderWeights w;
  w.embed = r.read(pre + "wte.weight", {V, H});
  w.pos_embed = r.read(pre + "wpe.weight", {P, H});
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = pre + "h." + std::to_string(i) + ".";
    DecoderLayerWeights lw;
    lw.attn_norm = read_layer_norm(r, p + "ln_1", H);
    lw.qkv = read_conv1d(r, p + "attn.c_attn", H, 3 * H);  // columns: q | k | v, heads contiguous within each
    lw.o = read_conv1d(r, p + "attn.c_proj", H, H);
    lw.mlp_norm = read_layer_norm(r, p + "ln_2", H);
    lw.up = read_conv1d(r, p + "mlp.c_fc", H, I);
    lw.down = read_conv1d(r, p + "mlp.c_proj", I, H);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = read_layer_norm(r, pre + "ln_f", H);
  r.finish();
  return std::make_unique<DecoderModel>(c, spec, std::move(w), num_threads);
}

}  // namespace engine
