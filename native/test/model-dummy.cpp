// load_format "dummy" and the device choice on the CPU backend: a config.json alone loads (no weight file is
// read), twice to the same logits; the weights follow the shapes the config gives (tp slices of one global tensor
// are checked on GPUs by cuda-parallel); bad values name the field; device cuda in a build or on a machine without
// it says why and what to do.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "check.h"
#include "cuda/cuda-backend.h"
#include "model/dummy-value.h"
#include "model/model.h"
#include "temp-dir.h"

using namespace engine;

namespace {
std::string config_dir() {
  const std::string d = test::make_temp_dir("model-dummy");
  FILE* f = std::fopen((d + "/config.json").c_str(), "w");
  std::fputs(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 101,
    "max_position_embeddings": 128, "tie_word_embeddings": false})", f);
  std::fclose(f);
  return d;
}
}  // namespace

TEST_MAIN({
  const std::string dir = config_dir();
  LoadOptions o;
  o.num_threads = 1;
  o.load_format = "dummy";
  auto a = load_model(dir, o);
  auto b = load_model(dir, o);
  CHECK(a->config().vocab_size == 101);
  // 2 layers x (qkv 128x64 + o 64x64 + gate/up 192x64 + down 64x96 + 2 norms of 64) + embed + head 101x64, fp32.
  const size_t params = 2 * (128 * 64 + 64 * 64 + 192 * 64 + 64 * 96 + 2 * 64) + 2 * 101 * 64 + 64;
  CHECK_MSG(a->weight_bytes() == params * 4, "weight bytes %zu, expected %zu", a->weight_bytes(), params * 4);
  a->allocate_kv(8, 16);
  b->allocate_kv(8, 16);
  ForwardOutput oa, ob;
  a->forward({{{1, 5, 9, 100}, 0, {3, 1}, true}}, oa);
  b->forward({{{1, 5, 9, 100}, 0, {3, 1}, true}}, ob);
  CHECK(oa.logits.size() == 4 * 101 && oa.logits == ob.logits);
  bool varied = false;
  for (float v : oa.logits) varied = varied || (v != oa.logits[0]);
  CHECK_MSG(varied, "dummy logits are all equal: weights not filled");
  // Values are k / 128 * scale for 8-bit k: exact in bf16 and fp16, so CPU and GPU models hold the same weights.
  for (uint64_t i = 0; i < 1000; ++i) {
    const float v = dummy_value(7, 33, i, 1.0f / 32);
    const float k = v * 32 * 128;
    CHECK(k == static_cast<float>(static_cast<int>(k)) && k >= -128 && k < 128);
  }

  // Mixture-of-experts shapes: the same weights as the checkpoint's (router, every expert, the shared expert and its
  // gate), filled and run.
  for (const char* name : {"tiny-mixtral", "tiny-qwen2-moe", "tiny-qwen3-moe"}) {
    const std::string moe = check::repo_root + "/test/fixtures/models/" + name;
    LoadOptions real;
    real.num_threads = 1;
    auto dummy = load_model(moe, o);
    CHECK_MSG(dummy->weight_bytes() == load_model(moe, real)->weight_bytes(), "%s: dummy weight bytes %zu", name,
              dummy->weight_bytes());
    dummy->allocate_kv(8, 16);
    ForwardOutput out;
    dummy->forward({{{1, 5, 9, 100}, 0, {3, 1}, true}}, out);
    bool moe_varied = false;
    for (float v : out.logits) moe_varied = moe_varied || (v != out.logits[0]);
    CHECK_MSG(moe_varied, "%s: dummy logits are all equal", name);
  }

  LoadOptions bad = o;
  bad.load_format = "npz";
  CHECK_THROWS(load_model(dir, bad), "load_format must be auto or dummy, got 'npz'");
  LoadOptions cuda = o;
  cuda.device = Device::cuda;
  if (!cuda_backend_built()) {
    CHECK_THROWS(load_model(dir, cuda), "device cuda: ");
    CHECK_THROWS(load_model(dir, cuda), "use device cpu");
    LoadOptions autos = o;
    autos.device = Device::auto_select;
    CHECK(!load_model(dir, autos)->on_device());  // auto without the backend: the CPU model
  } else if (cuda_device_count() == 0) {
    CHECK_THROWS(load_model(dir, cuda), "no GPU is visible");
  }
})
