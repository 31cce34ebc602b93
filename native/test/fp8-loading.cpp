// FP8 (issue 24): the e4m3 codec, the FP8 form the loaders keep for FP8 backends (Linear::fp8) against the floats
// the CPU runs, per format and tensor-parallel slice, and every refusal of a checkpoint we cannot run.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include "check.h"
#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/safetensors.h"
#include "loading/weight-reader.h"
#include "model/llama.h"
#include "model/model-config.h"
#include "parallel/parallel-layout.h"
#include "quant/fp8-matrix.h"
#include "temp-dir.h"

using namespace engine;

namespace {

void codec() {
  int round_trips = 0;
  for (int i = 0; i < 256; ++i) {
    const float v = decode_e4m3(static_cast<uint8_t>(i));
    if (std::isnan(v)) continue;
    if (encode_e4m3(v) == i || (v == 0 && encode_e4m3(v) == (i & 0x80))) ++round_trips;
  }
  CHECK_MSG(round_trips == 254, "%d of the 254 finite codes round-trip", round_trips);
  CHECK(std::isnan(decode_e4m3(0x7f)) && std::isnan(decode_e4m3(0xff)));
  CHECK(decode_e4m3(0x7e) == 448.0f && decode_e4m3(0x01) == std::ldexp(1.0f, -9));
  CHECK(encode_e4m3(1.0625f) == 0x38);    // halfway between 1 and 1.125: the even code
  CHECK(encode_e4m3(1.1875f) == 0x3a);    // halfway between 1.125 and 1.25: the even code
  CHECK(encode_e4m3(1000.0f) == 0x7e && encode_e4m3(-1e9f) == 0xfe);  // saturates
  CHECK(encode_e4m3(std::ldexp(1.0f, -10)) == 0x00);  // half the smallest subnormal: ties to zero
  const float w[6] = {0.5f, -2.0f, 448.0f, 0.0f, 0.0f, 0.0f};
  const Fp8Matrix m = quantize_per_channel(w, 2, 3);
  CHECK(m.scales[0] == 1.0f && m.scales[1] == 1.0f);  // max 448: scale 1; an all-zero row: scale 1
  CHECK(dequantize(m) == std::vector<float>(w, w + 6));
}

// Every projection of every layer: dequantize(fp8) is the very w the CPU runs, and fp8 exists exactly where the
// slice keeps whole scale blocks.
void retained(const std::string& dir, const std::string& name, int32_t tp, int per_layer) {
  const ModelConfig config = load_model_config(dir);
  Checkpoint checkpoint(dir);
  for (int32_t rank = 0; rank < tp; ++rank) {
    ShardInfo shard;
    shard.tp_rank = rank;
    shard.tp_size = tp;
    LoadOptions options;
    options.shard = shard;
    WeightReader reader(checkpoint, options, config.quant);
    const DecoderWeights w = read_llama_weights(config, reader, make_parallel_layout(config, shard));
    int with = 0, exact = 0;
    for (const DecoderLayerWeights& l : w.layers)
      for (const Linear* p : {&l.qkv, &l.o, &l.up, &l.down}) {
        if (p->fp8.empty()) continue;
        ++with;
        exact += p->fp8.rows == p->out && p->fp8.cols == p->in && dequantize(p->fp8) == p->w;
      }
    const int expected = static_cast<int>(w.layers.size()) * per_layer;
    CHECK_MSG(with == expected && exact == with,
              "%s tp %d rank %d: %d projections FP8 (expected %d), %d equal to the floats", name.c_str(), tp, rank,
              with, expected, exact);
  }
}

std::string write_checkpoint(const std::string& config, const std::vector<TensorToWrite>& tensors) {
  const std::string dir = test::make_temp_dir("fp8-loading");
  std::ofstream(dir + "/config.json") << config;
  write_safetensors(dir + "/model.safetensors", tensors);
  return dir;
}

TensorToWrite f32(const std::string& name, std::vector<int64_t> shape, float value) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  TensorToWrite t{name, DType::f32, std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) std::memcpy(t.bytes.data() + i * 4, &value, 4);
  return t;
}

TensorToWrite e4m3(const std::string& name, std::vector<int64_t> shape, const std::string& dtype = "F8_E4M3") {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  TensorToWrite t{name, DType::f8_e4m3, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(n), 0x38)};
  (void)dtype;
  return t;
}

std::string llama_config(const std::string& quant) {
  return R"({"architectures":["LlamaForCausalLM"],"vocab_size":16,"hidden_size":32,"num_hidden_layers":1,)"
         R"("num_attention_heads":2,"intermediate_size":32,"tie_word_embeddings":true)" + quant + "}";
}

// A one-layer llama whose projections are FP8 with `scale_suffix` tensors of `scale_shape`.
std::vector<TensorToWrite> fp8_layer(const std::string& scale_suffix, std::vector<int64_t> scale_shape) {
  std::vector<TensorToWrite> t = {f32("model.embed_tokens.weight", {16, 32}, 0.1f),
                                  f32("model.norm.weight", {32}, 1.0f),
                                  f32("model.layers.0.input_layernorm.weight", {32}, 1.0f),
                                  f32("model.layers.0.post_attention_layernorm.weight", {32}, 1.0f)};
  for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                        "mlp.up_proj", "mlp.down_proj"}) {
    const std::string p = std::string("model.layers.0.") + m;
    t.push_back(e4m3(p + ".weight", {32, 32}));
    if (!scale_suffix.empty()) t.push_back(f32(p + "." + scale_suffix, scale_shape, 0.5f));
  }
  return t;
}

void load_all(const std::string& dir) {
  const ModelConfig config = load_model_config(dir);
  Checkpoint checkpoint(dir);
  WeightReader reader(checkpoint, LoadOptions{}, config.quant);
  read_llama_weights(config, reader, make_parallel_layout(config, ShardInfo{}));
}

void refusals() {
  const std::string block = R"(,"quantization_config":{"quant_method":"fp8","activation_scheme":"dynamic","weight_block_size":[16,16]})";
  // The good case first, so the refusals below fail for their own reason.
  load_all(write_checkpoint(llama_config(block), fp8_layer("weight_scale_inv", {2, 2})));
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(R"(,"quantization_config":{"quant_method":"awq","bits":4})"), {})),
               "quantization_config.quant_method \"awq\" is not supported");
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(
                   R"(,"quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{}})"), {})),
               ".format \"pack-quantized\" is not supported");
  const std::string ct = R"(,"quantization_config":{"quant_method":"compressed-tensors","format":"float-quantized",)"
                         R"("config_groups":{"g":{"targets":["Linear"],"weights":)";
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(ct + R"({"num_bits":4,"type":"float","strategy":"channel"}}}})"), {})),
               "config_groups.g.weights.num_bits 4 is not supported");
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(ct + R"({"num_bits":8,"type":"int","strategy":"channel"}}}})"), {})),
               "weights.type \"int\" is not supported");
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(ct + R"({"num_bits":8,"type":"float","strategy":"group","group_size":128}}}})"), {})),
               "weights.strategy \"group\" is not supported");
  CHECK_THROWS(load_model_config(write_checkpoint(llama_config(ct + R"({"num_bits":8,"type":"float","strategy":"channel","symmetric":false}}}})"), {})),
               "weights.symmetric false is not supported");
  // ModelOpt's other algorithms.
  {
    const std::string dir = write_checkpoint(llama_config(""), {});
    std::ofstream(dir + "/hf_quant_config.json") << R"({"producer":{"name":"modelopt"},"quantization":{"quant_algo":"NVFP4"}})";
    CHECK_THROWS(load_model_config(dir), "quant_algo \"NVFP4\" is not supported");
  }
  // Tensors: a missing scale, a scale of the wrong shape, FP8 without any quantization config, E5M2.
  CHECK_THROWS(load_all(write_checkpoint(llama_config(block), fp8_layer("", {}))),
               "tensor 'model.layers.0.self_attn.q_proj.weight_scale_inv' not found");
  CHECK_THROWS(load_all(write_checkpoint(llama_config(block), fp8_layer("weight_scale_inv", {2, 3}))),
               "tensor 'model.layers.0.self_attn.q_proj.weight_scale_inv' has shape [2, 3], expected [2, 2] (one per 16x16 block)");
  CHECK_THROWS(load_all(write_checkpoint(llama_config(""), fp8_layer("weight_scale", {1}))),
               "tensor 'model.layers.0.self_attn.q_proj.weight' is F8_E4M3 but");
  {
    std::vector<TensorToWrite> t = fp8_layer("weight_scale_inv", {2, 2});
    const std::string dir = write_checkpoint(llama_config(block), t);
    // Rewrite one tensor's dtype to F8_E5M2 in the header (same element size).
    std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find("F8_E4M3");
    bytes.replace(at, 7, "F8_E5M2");
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    CHECK_THROWS(load_all(dir), "has dtype F8_E5M2, which is not supported");
  }
}

}  // namespace

TEST_MAIN({
  codec();
  refusals();
  const std::string root = check::repo_root + "/test/fixtures/models";
  if (!check::exists(root + "/tiny-llama-fp8-block128/config.json")) return check::skip("FP8 fixtures missing under %s", root.c_str());
  // Whole: every projection keeps its FP8 form. At tp 2 a block-scaled slice must keep whole blocks: block 32 of
  // tiny-llama (one 16-row kv head per rank, 80 intermediate rows per rank) and block 128 of the wider fixture
  // (64-row kv heads, 192 intermediate rows) keep only o_proj's half (32 / 128 whole columns); the rest runs
  // dequantized. Per-tensor and per-channel scales slice anywhere.
  retained(root + "/tiny-llama-fp8-block", "block32", 1, 4);
  retained(root + "/tiny-llama-fp8-block", "block32", 2, 1);
  retained(root + "/tiny-llama-fp8-block128", "block128", 1, 4);
  retained(root + "/tiny-llama-fp8-block128", "block128", 2, 1);
  for (const char* f : {"ct-channel", "ct-tensor-static", "modelopt"})
    for (int32_t tp : {1, 2}) retained(root + "/tiny-llama-fp8-" + f, f, tp, 4);
})
