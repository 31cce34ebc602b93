// Tensor and pipeline parallel forward under a real mpirun: `model-parallel <repo> <tp> <pp> [ep=N]
// [expected-error]`, started as tp * pp ranks (ep > 1: experts split over ep groups, only the MoE fixtures run). World rank = pp_rank * tp + tp_rank; every rank builds the same chunks (the executor's
// leader broadcasts them later), and the leader (world rank 0) checks what it ends forward() with:
//  - the fixtures against Hugging Face transformers: context logits within 1e-4 relative error, greedy
//    continuations (step by step through the paged KV cache) identical token for token;
//  - a random Llama written here with what the fixtures lack (vocab 509, which tp 2 and 4 must pad; q/k/v/o and
//    MLP biases; an untied LM head; 3 layers, so pp 2 splits them unevenly) against the same model on one rank,
//    including a batch whose prefill chunk asks only for its last row.
// With [expected-error], every rank must fail to load with that message instead (and nobody hangs).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sys/stat.h>

#include "check.h"
#include "lora-test-util.h"
#include "comm/comm.h"
#include "errors.h"
#include "loading/json.h"
#include "loading/load-agreement.h"
#include "loading/safetensors.h"
#include "model/model.h"
#include "parallel/iteration-plan.h"
#include "parallel/parallel-grid.h"
#include "prompt-table-test-util.h"
#include "temp-dir.h"

using namespace engine;

namespace {

struct Grid : ParallelGrid {
  Comm world;
  bool leader() const { return world.rank() == 0; }
  bool last_stage() const { return shard.pp_rank == shard.pp_size - 1; }
};

Grid make_grid(int32_t tp, int32_t pp) {
  Grid g;
  g.world = comm_world();
  try {
    static_cast<ParallelGrid&>(g) = make_parallel_grid(g.world, tp, pp);
  } catch (const EngineError& e) {
    comm_abort(2, e.what());
  }
  return g;
}

LoadOptions grid_options(const Grid& g) {
  LoadOptions o;
  o.shard = g.shard;
  o.tp_comm = g.tp;
  o.pp_comm = g.pp;
  o.num_threads = 1;  // ranks are oversubscribed on a small machine
  return o;
}

LoadOptions single_options() {
  LoadOptions o;
  o.num_threads = 1;
  return o;
}

std::vector<int32_t> scrambled_blocks(int32_t n, int32_t first, int32_t pool) {
  std::vector<int32_t> b(n);
  for (int32_t i = 0; i < n; ++i) b[i] = first + (i * 37 + 11) % n;  // n coprime with 37
  for (int32_t id : b)
    if (id >= pool) comm_abort(2, "test block table exceeds the pool");
  return b;
}

int32_t argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

double rel_err(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

// What one sequence produced: logits of every prompt token, the greedy continuation, comm of the two kinds of step.
struct Run {
  std::vector<float> context;
  std::vector<int32_t> greedy;
  ForwardCommStats prefill_comm, decode_comm;
};

// Collective when `g` is set: every rank runs the same forwards; the leader picks each next token and broadcasts
// it, as the executor will. g == nullptr: a single-rank model on the leader alone.
Run run_sequence(Model& m, const Grid* g, const std::vector<int32_t>& input, size_t steps,
                 const std::vector<int32_t>& blocks, const std::string& label) {
  const int32_t vocab = m.config().vocab_size, n = static_cast<int32_t>(input.size());
  const bool leader = g == nullptr || g->leader();
  const bool holds = leader || g->last_stage();
  Run run;
  ForwardOutput out;
  m.forward({{input, 0, blocks, true}}, out);
  run.prefill_comm = m.last_comm_stats();
  CHECK_MSG(out.logits.size() == (holds ? static_cast<size_t>(n) * vocab : 0u),
            "%s: rank %d ends forward with %zu logits", label.c_str(), g ? g->world.rank() : 0, out.logits.size());
  if (leader) run.context = out.logits;
  std::vector<float> row;
  if (leader) row.assign(out.logits.end() - vocab, out.logits.end());
  for (size_t step = 0; step < steps; ++step) {
    int32_t tok = leader ? argmax(row.data(), vocab) : -1;
    if (g) g->world.broadcast(&tok, sizeof(tok), 0);
    run.greedy.push_back(tok);
    if (step + 1 == steps) break;
    m.forward({{{tok}, n + static_cast<int32_t>(step), blocks, false}}, out);
    run.decode_comm = m.last_comm_stats();
    if (leader) row = out.logits;
  }
  return run;
}

std::string grid_name(const Grid& g) {
  return "tp=" + std::to_string(g.shard.tp_size) + " pp=" + std::to_string(g.shard.pp_size) +
         (g.shard.ep_size > 1 ? " ep=" + std::to_string(g.shard.ep_size) : "");
}

// Every rank's weight bytes, printed by the leader next to the single-rank model's.
void report_weights(const Grid& g, const Model& m, size_t single_bytes, const std::string& name) {
  const float mine = static_cast<float>(m.weight_bytes());
  std::vector<float> all(static_cast<size_t>(g.world.size()));
  g.world.gather(&mine, 1, all.data(), 0);
  if (!g.leader()) return;
  std::printf("%s %s: weight bytes per rank:", grid_name(g).c_str(), name.c_str());
  for (float b : all) std::printf(" %.0f", b);
  std::printf(" (single rank: %zu, ratio of rank 0: %.3f)\n", single_bytes, all[0] / single_bytes);
}

void print_comm(const Grid& g, const std::string& label, const Run& r) {
  std::printf("%s %s: comm per forward: prefill %.2f ms in %d calls (%llu bytes), decode %.2f ms in %d calls (%llu bytes)\n",
              grid_name(g).c_str(), label.c_str(), r.prefill_comm.seconds * 1e3, r.prefill_comm.calls,
              static_cast<unsigned long long>(r.prefill_comm.bytes), r.decode_comm.seconds * 1e3, r.decode_comm.calls,
              static_cast<unsigned long long>(r.decode_comm.bytes));
}

void check_fixture(const Grid& g, const std::string& dir, const std::string& name) {
  std::unique_ptr<Model> model = load_model_collective(dir, grid_options(g));
  size_t single_bytes = 0;
  if (g.leader()) single_bytes = load_model(dir, single_options())->weight_bytes();
  report_weights(g, *model, single_bytes, name);
  model->allocate_kv(64, 16);
  const std::vector<int32_t> blocks = scrambled_blocks(64, 0, 64);
  const int32_t vocab = model->config().vocab_size;

  json::Value ref = json::parse_file(dir + "/reference.json");
  std::unique_ptr<SafetensorsFile> ref_tensors;
  if (g.leader()) ref_tensors = std::make_unique<SafetensorsFile>(dir + "/reference.safetensors");
  const auto& cases = ref.find("cases")->as_array();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const json::Value& c = cases[ci];
    const std::string label = name + "/" + c.find("name")->as_string();
    std::vector<int32_t> input, want;
    for (const auto& v : c.find("input_ids")->as_array()) input.push_back(static_cast<int32_t>(v.as_int64()));
    for (const auto& v : c.find("greedy_output_ids")->as_array()) want.push_back(static_cast<int32_t>(v.as_int64()));
    const Run r = run_sequence(*model, &g, input, want.size(), blocks, label);
    if (!g.leader()) continue;
    const TensorInfo* hf = ref_tensors->find("case" + std::to_string(ci) + ".context_logits");
    const size_t n = input.size() * static_cast<size_t>(vocab);
    CHECK_MSG(hf && hf->dtype == DType::f32 && static_cast<size_t>(hf->numel()) == n && r.context.size() == n,
              "%s: reference or engine logits mis-shaped", label.c_str());
    if (!hf || static_cast<size_t>(hf->numel()) != n || r.context.size() != n) continue;
    const double err = rel_err(r.context.data(), reinterpret_cast<const float*>(hf->data), n);
    size_t same = 0;
    for (size_t i = 0; i < std::min(want.size(), r.greedy.size()); ++i) same += r.greedy[i] == want[i];
    std::printf("%s %s: context logits max rel err %.3g, greedy %zu/%zu tokens match transformers\n",
                grid_name(g).c_str(), label.c_str(), err, same, want.size());
    CHECK_MSG(err < 1e-4, "%s: context logits rel err %g", label.c_str(), err);
    CHECK_MSG(r.greedy == want, "%s: greedy output differs from transformers", label.c_str());
    if (ci == 0) print_comm(g, label, r);
  }
}

// A random Llama with an odd vocab, biases everywhere, an untied head and 3 layers, written by the leader.
// Without `final_norm` it lacks model.norm.weight, which only the last pipeline stage reads.
std::string write_odd_llama(bool final_norm = true) {
  constexpr int64_t V = 509, H = 32, L = 3, NH = 4, NKV = 2, HD = 8, I = 48;
  const std::string dir = test::make_temp_dir("model-parallel");
  std::ofstream(dir + "/config.json")
      << R"({"architectures":["LlamaForCausalLM"],"vocab_size":509,"hidden_size":32,"num_hidden_layers":3,)"
      << R"("num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"attention_bias":true,)"
      << R"("mlp_bias":true,"tie_word_embeddings":false,"max_position_embeddings":64,"rms_norm_eps":1e-5})";
  std::mt19937 rng(77);
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(-scale, scale);
    TensorToWrite t{name, DType::f32, shape, {}};
    t.bytes.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float f = offset + u(rng);
      std::memcpy(t.bytes.data() + i * 4, &f, 4);
    }
    tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {V, H}, 1.0f, 0);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1);
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      const int64_t out = proj[0] == 'q' ? NH * HD : NKV * HD;
      add(p + "self_attn." + proj + ".weight", {out, H}, 0.3f, 0);
      add(p + "self_attn." + proj + ".bias", {out}, 0.3f, 0);
    }
    add(p + "self_attn.o_proj.weight", {H, NH * HD}, 0.3f, 0);
    add(p + "self_attn.o_proj.bias", {H}, 0.3f, 0);
    add(p + "mlp.gate_proj.weight", {I, H}, 0.3f, 0);
    add(p + "mlp.gate_proj.bias", {I}, 0.3f, 0);
    add(p + "mlp.up_proj.weight", {I, H}, 0.3f, 0);
    add(p + "mlp.up_proj.bias", {I}, 0.3f, 0);
    add(p + "mlp.down_proj.weight", {H, I}, 0.3f, 0);
    add(p + "mlp.down_proj.bias", {H}, 0.3f, 0);
  }
  if (final_norm) add("model.norm.weight", {H}, 0.1f, 1);
  add("lm_head.weight", {V, H}, 0.5f, 0);
  write_safetensors(dir + "/model.safetensors", tensors);
  return dir;
}

void check_odd_llama(const Grid& g) {
  std::vector<uint8_t> path;
  if (g.leader()) {
    const std::string dir = write_odd_llama();
    path.assign(dir.begin(), dir.end());
  }
  g.world.broadcast_bytes(path, 0);
  const std::string dir(path.begin(), path.end());
  const std::string name = "odd-llama";
  std::unique_ptr<Model> model = load_model_collective(dir, grid_options(g));
  std::unique_ptr<Model> single;
  if (g.leader()) single = load_model(dir, single_options());
  report_weights(g, *model, single ? single->weight_bytes() : 0, name);
  model->allocate_kv(32, 4);
  if (single) single->allocate_kv(32, 4);

  // Ids at the vocab slices' edges (tp 4: 127|128, 255|256, 383|384; the last real id 508).
  const std::vector<int32_t> a = {1, 127, 128, 255, 256, 383, 384, 508, 3, 77, 400, 9, 200};
  const std::vector<int32_t> blocks_a = scrambled_blocks(16, 0, 32), blocks_b = scrambled_blocks(16, 16, 32);
  const Run r = run_sequence(*model, &g, a, 10, blocks_a, name);
  if (g.leader()) {
    const Run want = run_sequence(*single, nullptr, a, 10, blocks_a, name);
    const double err = rel_err(r.context.data(), want.context.data(), want.context.size());
    size_t same = 0;
    for (size_t i = 0; i < want.greedy.size(); ++i) same += r.greedy[i] == want.greedy[i];
    std::printf("%s %s: context logits max rel err %.3g vs one rank, greedy %zu/%zu tokens match\n",
                grid_name(g).c_str(), name.c_str(), err, same, want.greedy.size());
    CHECK_MSG(r.context.size() == want.context.size() && err < 1e-4, "%s: rel err %g", name.c_str(), err);
    CHECK_MSG(r.greedy == want.greedy, "%s: greedy differs from one rank", name.c_str());
    print_comm(g, name, r);
  }

  // One batch: a second prompt (last-row logits only) next to a decode step of the first sequence. The last
  // stage keeps 2 of 7 rows; on one rank the same.
  const std::vector<int32_t> b = {5, 500, 6, 250, 7, 130};
  const int32_t past = static_cast<int32_t>(a.size() + 9);
  const std::vector<SequenceChunk> batch = {{b, 0, blocks_b, false}, {{r.greedy.back()}, past, blocks_a, false}};
  ForwardOutput out;
  model->forward(batch, out);
  if (g.leader()) {
    ForwardOutput want;
    single->forward(batch, want);
    CHECK(out.first_row == want.first_row && out.logits.size() == want.logits.size());
    if (out.logits.size() == want.logits.size()) {
      const double err = rel_err(out.logits.data(), want.logits.data(), want.logits.size());
      std::printf("%s %s: mixed batch (prefill + decode) logits max rel err %.3g vs one rank\n",
                  grid_name(g).c_str(), name.c_str(), err);
      CHECK_MSG(err < 1e-4, "mixed batch rel err %g", err);
    }
  }
  g.world.barrier();
  if (g.leader()) {
    ::unlink((dir + "/model.safetensors").c_str());
    ::unlink((dir + "/config.json").c_str());
    ::rmdir(dir.c_str());
  }
}

// A tensor only the last stage reads is missing: that stage reports it, and every other rank learns from
// load_model_collective that another rank failed instead of going on to wait in forward().
void check_one_stage_load_failure(const Grid& g) {
  std::vector<uint8_t> path;
  if (g.leader()) {
    const std::string dir = write_odd_llama(false);
    path.assign(dir.begin(), dir.end());
  }
  g.world.broadcast_bytes(path, 0);
  const std::string dir(path.begin(), path.end());
  const std::string want = g.last_stage() ? "tensor 'model.norm.weight' not found"
                                          : "loading the model failed on " + std::to_string(g.shard.tp_size) +
                                                " other rank(s) of the " + std::to_string(g.shard.tp_size) + " x " +
                                                std::to_string(g.shard.pp_size) + " (tp x pp) grid";
  CHECK_THROWS(load_model_collective(dir, grid_options(g)), want.c_str());
  g.world.barrier();
  if (g.leader()) {
    std::printf("%s: a load failure on the last stage reached every rank\n", grid_name(g).c_str());
    ::unlink((dir + "/model.safetensors").c_str());
    ::unlink((dir + "/config.json").c_str());
    ::rmdir(dir.c_str());
  }
}

// LoRA on a grid: one forward with chunks of two adapters (all modules; q/v/down of one layer) and of none, every
// rank holding its slice (lora-local.h), against the single-rank model with the same adapters on the leader.
void check_lora(const Grid& g, const std::string& dir) {
  std::unique_ptr<Model> model = load_model_collective(dir, grid_options(g));
  std::unique_ptr<Model> single;
  if (g.leader()) single = load_model(dir, single_options());
  const ModelConfig& mc = model->config();
  auto a = test::random_adapter(mc, test::all_lora_modules(), {0, 1}, 4, 7);
  auto b = test::random_adapter(mc, {LoraModule::attn_q, LoraModule::attn_v, LoraModule::mlp_4h_to_h}, {1}, 2, 8);
  std::vector<SequenceChunk> chunks(3);
  for (int32_t i = 0; i < 3; ++i) {
    for (int32_t t = 0; t < 6 + i; ++t) chunks[i].tokens.push_back((t * 37 + i * 11 + 5) % mc.vocab_size);
    chunks[i].block_ids = {i};
    chunks[i].all_logits = true;
    chunks[i].lora_slot = i == 2 ? -1 : i;
  }
  for (Model* m : {model.get(), single.get()}) {
    if (m == nullptr) continue;
    m->allocate_kv(4, 16);
    m->load_lora(0, *a);
    m->load_lora(1, *b);
  }
  ForwardOutput got, want;
  model->forward(chunks, got);
  g.world.barrier();  // the last stage's send of the logits has landed before its model (and buffers) go
  if (!g.leader()) return;
  single->forward(chunks, want);
  const double err = want.logits.size() == got.logits.size()
                         ? rel_err(got.logits.data(), want.logits.data(), want.logits.size()) : 1.0;
  std::printf("%s lora: logits of two adapters and the base in one batch, max rel err %.3g against one rank\n",
              grid_name(g).c_str(), err);
  CHECK_MSG(err < 1e-4, "%s lora: rel err %g", grid_name(g).c_str(), err);
  // The adapters change the logits: without them the batch differs.
  for (auto& c : chunks) c.lora_slot = -1;
  ForwardOutput plain;
  single->allocate_kv(4, 16);
  single->forward(chunks, plain);
  CHECK(rel_err(plain.logits.data(), want.logits.data(), want.logits.size()) > 1e-2);
}

// P-tuning on a grid: a chunk whose virtual tokens take rows equal to real tokens' embeddings against the single
// rank with those real tokens (under tp one rank writes each row, or the all-reduce would add it tp times). The
// followers' chunks come through the iteration plan (serialised and read back), as in leader mode.
void check_prompt_table(const Grid& g, const std::string& dir) {
  std::unique_ptr<Model> model = load_model_collective(dir, grid_options(g));
  const int32_t vocab = model->config().vocab_size;
  SequenceChunk c;
  c.tokens = {5, vocab + 1, 8, vocab + 0, 12, vocab + 1};
  c.block_ids = {0};
  c.all_logits = true;
  c.prompt_table = test::table_of_tokens(dir, {250, 17});
  std::vector<SequenceChunk> chunks{c};
  if (!g.leader()) {
    IterationPlan plan;
    plan.chunks = chunks;
    plan.vocab_size = vocab;
    chunks = deserialize_plan(serialize_plan(plan)).chunks;
  }
  model->allocate_kv(2, 16);
  ForwardOutput got, want;
  model->forward(chunks, got);
  g.world.barrier();  // (as in check_lora)
  if (!g.leader()) return;
  std::unique_ptr<Model> single = load_model(dir, single_options());
  single->allocate_kv(2, 16);
  SequenceChunk real = c;
  real.tokens = {5, 17, 8, 250, 12, 17};
  real.prompt_table = nullptr;
  single->forward({real}, want);
  const double err = want.logits.size() == got.logits.size()
                         ? rel_err(got.logits.data(), want.logits.data(), want.logits.size()) : 1.0;
  std::printf("%s prompt table: virtual tokens against their real tokens on one rank, max rel err %.3g\n",
              grid_name(g).c_str(), err);
  CHECK_MSG(err < 1e-4, "%s prompt table: rel err %g", grid_name(g).c_str(), err);
}

void run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: model-parallel <repo> <tp> <pp> [expected-error]\n");
    ++check::failures;
    return;
  }
  const int32_t tp = std::atoi(argv[2]), pp = std::atoi(argv[3]);
  int32_t ep = 1;
  if (argc > 4 && std::strncmp(argv[4], "ep=", 3) == 0) {
    ep = std::atoi(argv[4] + 3);
    ++argv;
    --argc;
  }
  comm_init(true);
  Grid g = make_grid(tp, pp);
  g.shard.ep_size = ep;
  const std::string fixtures = check::repo_root + "/test/fixtures/models";
  if (argc > 4) {
    // A grid that cannot split the model: every rank fails with the same message, nobody waits forever.
    CHECK_THROWS(load_model_collective(fixtures + "/tiny-llama", grid_options(g)), argv[4]);
    g.world.barrier();
    if (g.leader()) std::printf("%s: every rank refused the layout\n", grid_name(g).c_str());
    comm_finalize();
    return;
  }
  try {
    for (const char* name : {"tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-mixtral"}) check_fixture(g, fixtures + "/" + name, name);
    if (ep > 1) {
      g.world.barrier();
      comm_finalize();
      return;
    }
    for (const char* name : {"tiny-llama", "tiny-llama-sharded", "tiny-gpt2", "tiny-qwen3", "tiny-qwen3-bias", "tiny-phi3", "tiny-gemma",
                             "tiny-mistral-window", "tiny-qwen2-window", "tiny-gemma2", "tiny-phi3-longrope",
                             "tiny-llama-fp8-block", "tiny-llama-fp8-block128", "tiny-llama-fp8-ct-tensor-static"})
      check_fixture(g, fixtures + "/" + name, name);
    check_odd_llama(g);
    check_lora(g, fixtures + "/tiny-llama");
    check_prompt_table(g, fixtures + "/tiny-llama");
    if (pp > 1) check_one_stage_load_failure(g);
  } catch (const std::exception& e) {
    // One rank's failure would leave the others waiting in a collective: take the job down.
    comm_abort(1, std::string("model-parallel: ") + e.what());
  }
  g.world.barrier();
  comm_finalize();
}

}  // namespace

TEST_MAIN(run(argc, argv))
