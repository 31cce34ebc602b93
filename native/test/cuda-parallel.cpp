// Tensor / pipeline parallel on GPUs under mpirun (one rank per GPU; built only with the CUDA backend and NCCL):
// `cuda-parallel <repo> <tp> <pp> [--bench <config dir>]`. Every rank builds the same chunks; world rank 0 (the
// leader) compares its logits with the same model on its GPU alone (tp = pp = 1), for the fixtures and for a
// dummy-weight Llama with GQA 8/2 whose vocab needs tp padding, and for a dummy Qwen2-MoE with the experts' columns
// split (moe_tp = tp) and with whole experts per rank (ep = tp); greedy on the device must pick the same tokens.
// The tp group's all-reduce paths (NCCL, the peer one-shot and two-shot) must agree bit for bit, in and out of a
// CUDA graph. --bench (instead of the checks): the decode step time of that (large) dummy-weight shape on the grid,
// median of 30 steps at batch 1 and 64 after a 128-token prompt, with each all-reduce path's time for one such step
// (the step's all-reduce count times one all-reduce of its size, timed alone with CUDA events; AR_SWEEP=1: the
// paths from 16 KiB to 32 MiB first). --offline N: then N requests of 128 / 128 through
// the executor in leader mode as the launcher runs it (rank 0 schedules over a LeaderModel, the others follow).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "comm/comm-nccl.h"
#include "comm/comm.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "executor/executor.h"
#include "loading/json.h"
#include "loading/load-agreement.h"
#include "parallel/leader-model.h"
#include "parallel/parallel-grid.h"

using namespace engine;
using cudatest::rel_err;

namespace {

struct Grid : ParallelGrid {
  Comm world;
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

LoadOptions grid_options(const Grid& g, const std::string& format, int32_t ep = 1) {
  LoadOptions o = cudatest::options(Device::cuda, format);
  o.shard = g.shard;
  o.shard.ep_size = ep;
  o.tp_comm = g.tp;
  o.pp_comm = g.pp;
  return o;
}

// A long prompt (shortened to fit a learned position table) next to a short one, then a decode row next to a
// context chunk continuing the short one, then a decode step of both.
std::vector<SequenceChunk> batch_for(int32_t V, int32_t max_pos, int step, const std::vector<int32_t>& table_a,
                                     const std::vector<int32_t>& table_b) {
  auto prompt = [&](int n, int salt) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7919 + salt * 104729) % V;
    return t;
  };
  const int n = std::min(300, max_pos - 8);
  if (step == 0) return {{prompt(n, 1), 0, table_a, true}, {prompt(40, 2), 0, table_b, false}};
  if (step == 1) return {{{3}, n, table_a, false}, {prompt(20, 3), 40, table_b, true}};
  // A decode batch (one token per chunk): a CUDA graph on the grid as on one GPU, its collectives captured.
  return {{{7}, n + 1, table_a, false}, {{9}, 60, table_b, false}};
}

// CUDA_PARALLEL_TRACE=1: each rank says which stage of a comparison it reached (to find where a grid stalls).
void trace(const Grid& g, const char* label, const char* stage) {
  static const bool on = std::getenv("CUDA_PARALLEL_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "[rank %d] %s: %s\n", g.world.rank(), label, stage);
}

// LoRA (issue 29): two adapters in slots 0 and 1 of the model, every chunk of a step on one of them (the first on
// slot 0, the second on slot 1), so each rank applies its slice (lora-local.h) beside its projections.
std::vector<LoraAdapter> lora_pair(const ModelConfig& c) {
  std::vector<int32_t> layers;
  for (int32_t l = 0; l < c.num_layers; ++l) layers.push_back(l);
  std::vector<LoraAdapter> ads;
  ads.push_back(cudatest::dummy_lora_adapter(c, 16, test::all_lora_modules(), layers, 202, 1.0f / 32, 1.0f / 8));
  ads.push_back(cudatest::dummy_lora_adapter(c, 8, {LoraModule::attn_qkv, LoraModule::mlp_4h_to_h}, {0}, 303,
                                             1.0f / 32, 1.0f / 4));
  return ads;
}

void with_lora(Model& m, std::vector<SequenceChunk> chunks, ForwardOutput& o, bool lora) {
  if (lora)
    for (size_t i = 0; i < chunks.size(); ++i) chunks[i].lora_slot = static_cast<int32_t>(i % 2);
  m.forward(chunks, o);
}

constexpr int kSteps = 3;  // batch_for's steps

void compare(const Grid& g, const std::string& dir, const std::string& format, const char* label, int32_t ep = 1,
             bool lora = false) {
  const bool leader = g.world.rank() == 0;
  trace(g, label, "start");
  std::vector<std::vector<float>> ref;
  std::vector<int32_t> ref_greedy;
  const int32_t tpb = 16, nb = 64;
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 32; ++i) {
    ta.push_back((i * 37 + 11) % nb);
    tb.push_back((i * 37 + 11 + 32 * 37) % nb);
  }
  if (leader) {  // the single-GPU model first, on the leader's GPU
    auto single = load_model(dir, cudatest::options(Device::cuda, format));
    single->allocate_kv(nb, tpb);
    if (lora) {
      const auto ads = lora_pair(single->config());
      for (size_t i = 0; i < ads.size(); ++i) single->load_lora(static_cast<int32_t>(i), ads[i]);
    }
    for (int step = 0; step < kSteps; ++step) {
      ForwardOutput o;
      with_lora(*single, batch_for(single->config().vocab_size, single->config().max_position_embeddings, step, ta, tb),
                o, lora);
      ref.push_back(o.logits);
    }
    SequenceChunk c{{5}, std::min(300, single->config().max_position_embeddings - 8) + 2, ta, false};
    c.sample_on = SampleOn::device_argmax;
    ForwardOutput o;
    single->forward({c}, o);
    ref_greedy.push_back(o.sampled[0].token);
  }
  trace(g, label, "collective load");
  auto model = load_model_collective(dir, grid_options(g, format, ep));
  model->allocate_kv(nb, tpb);
  if (lora) {
    const auto ads = lora_pair(model->config());
    for (size_t i = 0; i < ads.size(); ++i) model->load_lora(static_cast<int32_t>(i), ads[i]);
  }
  for (int step = 0; step < kSteps; ++step) {
    trace(g, label, step == 0 ? "forward step 0" : step == 1 ? "forward step 1" : "forward step 2 (decode)");
    ForwardOutput o;
    with_lora(*model, batch_for(model->config().vocab_size, model->config().max_position_embeddings, step, ta, tb), o,
              lora);
    if (leader) {
      const double e = o.logits.size() == ref[step].size() ? rel_err(o.logits.data(), ref[step].data(), o.logits.size()) : 1;
      double norm = 0;
      for (float v : ref[step]) norm += static_cast<double>(v) * v;
      std::printf("%s tp=%d pp=%d ep=%d step %d: logits rel err vs one GPU %.3g (%zu values, reference L2 norm %.4g, "
                  "first values %.6g / %.6g)\n", label, g.shard.tp_size, g.shard.pp_size, ep, step, e, o.logits.size(),
                  std::sqrt(norm), o.logits.empty() ? 0.0 : o.logits[0], ref[step].empty() ? 0.0 : ref[step][0]);
      CHECK_MSG(e < 1e-2, "%s step %d: rel err %g", label, step, e);
    }
  }
  SequenceChunk c{{5}, std::min(300, model->config().max_position_embeddings - 8) + 2, ta, false};
  // Only the leader samples (Model::samples_on_device): the other ranks get the chunk as a follower does.
  if (leader) c.sample_on = SampleOn::device_argmax;
  ForwardOutput o;
  trace(g, label, "device greedy step");
  model->forward({c}, o);
  trace(g, label, "done");
  if (leader) CHECK_MSG(o.first_row[0] == -1 && o.sampled[0].token == ref_greedy[0], "%s: device greedy differs", label);
}

// The GPU the loader gives this rank (one per rank of a host), current on this thread before a DeviceComm is made.
void use_rank_gpu() { cudaSetDevice(comm_info().local_rank % cuda_device_count()); }

// The tp group's all-reduce paths against each other: every rank's values are multiples of 1/4 below 2^12, so
// every sum is exact and NCCL, one-shot and two-shot must give the same bits on every rank. Sizes: one float4, a
// decode step's row, one that does not split evenly over the blocks, a batch of rows (one-shot's capacity), two-shot's
// capacity, and a count the peer kernels cannot take (not whole float4s: NCCL). Then the peer calls captured in a CUDA graph
// (five of them, so each replay starts on another of the three slots; calls shorter than the grid between longer
// ones, of both kinds) and replayed three times. With the default grid, one block, 7 and the most (a call shorter
// than the grid is padded so that every block has rows).
void check_all_reduce_with(const Grid& g) {
  use_rank_gpu();
  std::unique_ptr<DeviceComm> dc = DeviceComm::create(g.tp, true);
  if (g.world.rank() == 0) std::printf("tp all-reduce: %s\n", dc->peer_status().c_str());
  const bool peer = dc->peer_status().rfind("peer memory", 0) == 0;
  CHECK_MSG(peer, "no peer all-reduce on this grid: %s", dc->peer_status().c_str());
  if (!peer) return;
  const int32_t r = g.tp.rank(), n = g.tp.size();
  auto value = [](size_t i, int32_t rank) { return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 4096) * 0.25f; };
  auto fill = [&](size_t count, size_t salt) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = value(i + salt, r);
    return v;
  };
  auto expected = [&](size_t count, size_t salt) {
    std::vector<float> v(count, 0.0f);
    for (size_t i = 0; i < count; ++i)
      for (int32_t p = 0; p < n; ++p) v[i] += value(i + salt, p);
    return v;
  };
  cudaStream_t st = nullptr;
  cudaStreamCreate(&st);
  const size_t biggest = size_t{2} << 20;  // 8 MiB of floats
  float* buf = nullptr;
  cudaMalloc(&buf, biggest * sizeof(float) * 3);
  std::vector<float> got;
  auto run = [&](AllReduceAlgo algo, size_t count, size_t salt, float* at) {
    const std::vector<float> v = fill(count, salt);
    cudaMemcpyAsync(at, v.data(), count * sizeof(float), cudaMemcpyHostToDevice, st);
    dc->all_reduce_sum_with(algo, at, count, st);
    got.resize(count);
    cudaMemcpyAsync(got.data(), at, count * sizeof(float), cudaMemcpyDeviceToHost, st);
    cudaStreamSynchronize(st);
    return got == expected(count, salt);
  };
  int call = 0;
  for (size_t count : {size_t{4}, size_t{4096}, size_t{4100}, size_t{64 * 4096}, biggest}) {
    for (AllReduceAlgo algo : {AllReduceAlgo::nccl, AllReduceAlgo::one_shot, AllReduceAlgo::two_shot}) {
      if (algo == AllReduceAlgo::one_shot && count * sizeof(float) > (size_t{1} << 20)) continue;  // (its capacity)
      const bool ok = run(algo, count, static_cast<size_t>(++call), buf);
      CHECK_MSG(ok, "rank %d: %s all-reduce of %zu floats differs from the exact sum", r, all_reduce_name(algo), count);
    }
  }
  CHECK_MSG(dc->all_reduce_algo(buf, 4097) == AllReduceAlgo::nccl, "4097 floats must go through NCCL");
  CHECK_MSG(dc->all_reduce_algo(buf, biggest + 4) == AllReduceAlgo::nccl, "past the peer slots: NCCL");
  CHECK_MSG(dc->all_reduce_algo(buf, 4096) == AllReduceAlgo::one_shot || std::getenv("TRTLLM_ALL_REDUCE") != nullptr,
            "a decode row goes one-shot");
  const bool auto_ok = run(dc->all_reduce_algo(buf, 4096), 4096, 99, buf);
  CHECK_MSG(auto_ok, "rank %d: the automatic choice differs from the exact sum", r);

  // Five buffers, five calls in one graph; each replay after fresh values are copied in.
  constexpr int kCalls = 5;
  const size_t counts[kCalls] = {4096, 4, 64 * 4096, 8, 8192};
  const AllReduceAlgo algos[kCalls] = {AllReduceAlgo::one_shot, AllReduceAlgo::two_shot, AllReduceAlgo::two_shot,
                                       AllReduceAlgo::one_shot, AllReduceAlgo::one_shot};
  float* at[kCalls];
  for (int k = 0; k < kCalls; ++k) at[k] = buf + static_cast<size_t>(k) * 64 * 4096;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  for (int k = 0; k < kCalls; ++k) dc->all_reduce_sum_with(algos[k], at[k], counts[k], st);
  cudaStreamEndCapture(st, &graph);
  CHECK_MSG(graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "rank %d: graph capture", r);
  for (int replay = 0; replay < 3 && exec != nullptr; ++replay) {
    std::vector<std::vector<float>> in(kCalls);
    for (int k = 0; k < kCalls; ++k) {
      in[k] = fill(counts[k], static_cast<size_t>(1000 * replay + k));
      cudaMemcpyAsync(at[k], in[k].data(), counts[k] * sizeof(float), cudaMemcpyHostToDevice, st);
    }
    cudaGraphLaunch(exec, st);
    for (int k = 0; k < kCalls; ++k) {
      got.resize(counts[k]);
      cudaMemcpyAsync(got.data(), at[k], counts[k] * sizeof(float), cudaMemcpyDeviceToHost, st);
      cudaStreamSynchronize(st);
      CHECK_MSG(got == expected(counts[k], static_cast<size_t>(1000 * replay + k)),
                "rank %d: replay %d, call %d of the graph differs from the exact sum", r, replay, k);
    }
  }
  CHECK_MSG(cudaGetLastError() == cudaSuccess, "rank %d: CUDA error in the all-reduce checks", r);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaFree(buf);
  cudaStreamDestroy(st);
  if (g.world.rank() == 0) std::printf("tp all-reduce: nccl, one-shot and two-shot agree bit for bit, in and out of a graph\n");
}

// TRTLLM_PEER_BLOCKS set to `blocks` (null: as it was) while `f` runs; every rank does the same.
template <typename F>
void with_peer_blocks(const char* blocks, F f) {
  const char* was = std::getenv("TRTLLM_PEER_BLOCKS");
  const std::string saved = was != nullptr ? was : "";
  if (blocks != nullptr) setenv("TRTLLM_PEER_BLOCKS", blocks, 1);
  f();
  if (was != nullptr)
    setenv("TRTLLM_PEER_BLOCKS", saved.c_str(), 1);
  else
    unsetenv("TRTLLM_PEER_BLOCKS");
}

void check_all_reduce(const Grid& g) {
  if (g.shard.tp_size == 1) return;
  for (const char* blocks : {static_cast<const char*>(nullptr), "1", "7", "256"})
    with_peer_blocks(blocks, [&] { check_all_reduce_with(g); });
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct ArTimes {
  double us[3] = {0, 0, 0};  // by AllReduceAlgo: nccl, one-shot, two-shot (0: that path cannot take the size)
  AllReduceAlgo chosen = AllReduceAlgo::nccl;
};
ArTimes all_reduce_times(const Grid& g, size_t count);

void bench(const Grid& g, const std::string& dir, int32_t ep) {
  LoadOptions lo = grid_options(g, "dummy", ep);
  lo.max_num_tokens = 8192;
  lo.max_batch_size = 64;
  g.world.barrier();
  const double t0 = now();
  auto model = load_model_collective(dir, lo);
  g.world.barrier();
  const double load_s = now() - t0;
  const int32_t V = model->config().vocab_size, tpb = 64, ctx = 128, steps = 30;
  const char* graphs = std::getenv("TRTLLM_CUDA_GRAPHS");
  const char* ar = std::getenv("TRTLLM_ALL_REDUCE");
  const std::string setting = std::string("graphs ") + (graphs != nullptr && std::string(graphs) == "0" ? "off" : "on") +
                              ", all-reduce " + (ar != nullptr ? ar : "auto");
  model->allocate_kv(64 * 4, tpb);
  for (int batch : {1, 64}) {
    std::vector<std::vector<int32_t>> tables(batch);
    for (int s = 0; s < batch; ++s)
      for (int b = 0; b < 4; ++b) tables[s].push_back(s * 4 + b);
    std::vector<SequenceChunk> pre;
    for (int s = 0; s < batch; ++s) {
      std::vector<int32_t> t(ctx);
      for (int i = 0; i < ctx; ++i) t[i] = (i * 31 + s) % V;
      pre.push_back({t, 0, tables[s], false});
    }
    ForwardOutput o;
    model->forward(pre, o);
    std::vector<double> times;
    for (int step = 0; step < steps + 3; ++step) {
      std::vector<SequenceChunk> chunks;
      for (int s = 0; s < batch; ++s) {
        SequenceChunk c{{(step + s) % V}, ctx + step, tables[s], false};
        if (g.world.rank() == 0) c.sample_on = SampleOn::device_argmax;  // (the leader alone samples)
        chunks.push_back(c);
      }
      g.world.barrier();
      const double a = now();
      model->forward(chunks, o);
      if (step >= 3) times.push_back(now() - a);
    }
    std::sort(times.begin(), times.end());
    const ForwardCommStats cs = model->last_comm_stats();
    const ArTimes ar_t = all_reduce_times(g, static_cast<size_t>(batch) * model->config().hidden_size);
    const AllReduceAlgo used = ar != nullptr && std::string(ar) == "nccl" ? AllReduceAlgo::nccl : ar_t.chosen;
    const double ar_us = used == AllReduceAlgo::skip ? 0.0 : ar_t.us[static_cast<int>(used)];
    // All-reduces of a decode step on this rank: the embedding's (first stage) and two per layer of the stage.
    const int32_t per_step = (g.shard.pp_rank == 0 ? 1 : 0) + 2 * (model->config().num_layers / g.shard.pp_size);
    if (g.world.rank() == 0)
      std::printf("bench tp=%d pp=%d ep=%d (%s): %.2f GB of weights per rank, load %.1f s, batch %d decode step "
                  "%.3f ms; %d transfers per step, all-reduce of %d x %d fp32: nccl %.1f us, one-shot %.1f us, "
                  "two-shot %.1f us -> %.3f ms of all-reduce per step\n",
                  g.shard.tp_size, g.shard.pp_size, ep, setting.c_str(), model->weight_bytes() / 1e9, load_s, batch,
                  times[times.size() / 2] * 1000, cs.calls, batch, model->config().hidden_size, ar_t.us[0],
                  ar_t.us[1], ar_t.us[2], g.shard.tp_size > 1 ? per_step * ar_us / 1000 : 0.0);
  }
}

// One all-reduce of `count` floats over the rank's tp group through each path, as a step runs them: 20 calls
// back to back captured in a CUDA graph, its replay timed with CUDA events (median of 10 after 2 warm-up replays)
// and divided by 20. Every rank times; rank 0's are printed.
ArTimes all_reduce_times(const Grid& g, size_t count) {
  ArTimes t;
  if (g.shard.tp_size == 1) return t;
  use_rank_gpu();
  std::unique_ptr<DeviceComm> dc = DeviceComm::create(g.tp, true);
  float* buf = nullptr;
  cudaMalloc(&buf, count * sizeof(float));
  cudaMemset(buf, 0, count * sizeof(float));
  t.chosen = dc->all_reduce_algo(buf, count);
  cudaStream_t st = nullptr;
  cudaStreamCreate(&st);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  constexpr int kCalls = 20;
  for (AllReduceAlgo algo : {AllReduceAlgo::nccl, AllReduceAlgo::one_shot, AllReduceAlgo::two_shot}) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool ok = true;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    try {
      for (int i = 0; i < kCalls; ++i) dc->all_reduce_sum_with(algo, buf, count, st);
    } catch (const EngineError&) {
      ok = false;  // (a path that cannot take the size: the same answer on every rank)
    }
    cudaStreamEndCapture(st, &graph);
    if (ok && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      std::vector<double> us;
      g.tp.barrier();
      for (int r = 0; r < 12; ++r) {
        cudaEventRecord(a, st);
        cudaGraphLaunch(exec, st);
        cudaEventRecord(b, st);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 2) us.push_back(ms * 1000.0 / kCalls);
      }
      std::sort(us.begin(), us.end());
      t.us[static_cast<int>(algo)] = us[us.size() / 2];
    }
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(st);
  cudaFree(buf);
  return t;
}

// The crossover the plan's defaults come from (all-reduce-plan.h): each path's time from 16 KiB to 32 MiB, with the
// peer kernels' default grid or (AR_SWEEP_BLOCKS=16,32,64: TRTLLM_PEER_BLOCKS values) each grid in turn.
void all_reduce_sweep(const Grid& g) {
  if (g.shard.tp_size == 1) return;
  std::vector<std::string> grids{""};
  if (const char* list = std::getenv("AR_SWEEP_BLOCKS")) {
    grids.clear();
    std::string item;
    for (const char* c = list;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!item.empty()) grids.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else {
        item += *c;
      }
    }
  }
  for (const std::string& blocks : grids) {
    with_peer_blocks(blocks.empty() ? nullptr : blocks.c_str(), [&] {
      for (size_t kib : {16, 64, 256, 512, 1024, 2048, 4096, 8192, 32768}) {
        const ArTimes t = all_reduce_times(g, kib * 256);
        if (g.world.rank() == 0)
          std::printf("all-reduce sweep tp=%d blocks=%s: %zu KiB: nccl %.1f us, one-shot %.1f us, two-shot %.1f us "
                      "(auto: %s)\n",
                      g.shard.tp_size, blocks.empty() ? "default" : blocks.c_str(), kib, t.us[0], t.us[1], t.us[2],
                      all_reduce_name(t.chosen));
      }
    });
  }
}

// The executor runs below finish in seconds: a gang stuck for a minute reports every rank's wait and ends (liveness.h)
// rather than running into the caller's timeout unexplained.
const LivenessSettings kLiveness{std::chrono::milliseconds(60000)};

// The model on every rank of the grid; followers serve the leader's plans until it releases them and get null,
// the leader gets its model back to drive.
std::unique_ptr<Model> leader_or_follow(const Grid& g, const std::string& dir, const LoadOptions& lo) {
  auto model = load_model_collective(dir, lo);
  if (g.world.rank() == 0) return model;
  follower_loop(*model, g.world, kLiveness);
  return nullptr;
}

std::vector<int32_t> ids_of(const json::Value& list) {
  std::vector<int32_t> ids;
  for (const auto& v : list.as_array()) ids.push_back(static_cast<int32_t>(v.as_int64()));
  return ids;
}

// A reference case's prompt as a greedy request for as many tokens as its greedy_output_ids (which it returns alone).
Request case_request(const json::Value& c, bool streaming) {
  Request r;
  r.input_token_ids = ids_of(*c.find("input_ids"));
  r.max_tokens = static_cast<int32_t>(c.find("greedy_output_ids")->as_array().size());
  r.output.exclude_input_from_output = true;
  r.streaming = streaming;
  r.sampling.temperature = 0;
  return r;
}

// The executor in leader mode on the grid (pipelined where the CUDA leader pipelines, Model::pipeline_depth:
// micro_batches as given, 0: one per stage, up to its two) serves three copies of the fixture's cases at once, a
// third of them streamed and a third drawn on the host: every greedy token equals transformers' where the case's
// closest call (min_top1_margin) is clear of bf16's error, and pipelined runs used two micro-batches (one when
// micro_batches is 1).
// load_max_batch > 0: the model's buffers hold that many logit rows only, so wider passes take their logits in
// slices (a pipelined leader then ends the passes before such a one and runs it whole).
void executor_greedy(const Grid& g, const std::string& dir, int32_t micro_batches, int32_t load_max_batch = 0) {
  LoadOptions lo = grid_options(g, "auto");
  if (load_max_batch > 0) lo.max_batch_size = load_max_batch;
  auto model = leader_or_follow(g, dir, lo);
  if (!model) return;
  json::Value ref = json::parse_file(dir + "/reference.json");
  const auto& cases = ref.find("cases")->as_array();
  ExecutorConfig cfg;
  cfg.max_batch_size = 16;
  cfg.tokens_per_block = 16;
  cfg.pp_micro_batches = micro_batches;
  auto leader = std::make_unique<LeaderModel>(std::move(model), g.world, kLiveness);
  LeaderModel* lead = leader.get();
  const int32_t depth = lead->pipeline_depth();
  Executor ex(std::move(leader), cfg);
  std::vector<std::pair<RequestId, size_t>> which;
  std::set<RequestId> ids;
  ex.hold_iterations(0);  // all of them in the first plan
  for (int k = 0; k < 3; ++k)
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Request r = case_request(cases[ci], /*streaming=*/k == 1);
      // The third copy asks for its logits, so its rows go to the host sampler: passes mix argmax rows, which at
      // pp > 1 the last stage may argmax itself (Model::set_argmax_only), with rows whose logits it must send.
      r.output.return_generation_logits = k == 2;
      const RequestId id = ex.enqueue(r);
      ids.insert(id);
      which.push_back({id, ci});
    }
  ex.hold_iterations(-1);
  auto out = cudatest::collect(ex, ids);
  std::set<int32_t> micro;
  for (const IterationStats& s : ex.get_latest_iteration_stats()) micro.insert(s.inflight_batching_stats.micro_batch_id);
  ex.shutdown();
  lead->release_followers();
  int judged = 0, equal = 0;
  for (auto& [id, ci] : which) {
    const std::vector<int32_t> want = ids_of(*cases[ci].find("greedy_output_ids"));
    const cudatest::Outcome& o = out[id];
    CHECK_MSG(!o.has_error && o.reason == FinishReason::length, "executor at tp=%d pp=%d: request %lld: %s",
              g.shard.tp_size, g.shard.pp_size, static_cast<long long>(id), o.error.c_str());
    if (cases[ci].find("min_top1_margin")->as_number() < 0.05) continue;  // a close call may flip in bf16
    ++judged;
    equal += o.tokens == want ? 1 : 0;
  }
  const size_t want_micro = depth > 1 && micro_batches != 1 ? 2 : 1;
  std::printf("executor tp=%d pp=%d micro-batches %d%s: %d of %d clear cases give transformers' greedy tokens; "
              "micro-batch ids used: %zu\n",
              g.shard.tp_size, g.shard.pp_size, micro_batches, load_max_batch > 0 ? " (narrow buffers)" : "", equal,
              judged, micro.size());
  CHECK_MSG(judged > 0 && equal == judged, "executor tp=%d pp=%d: %d of %d", g.shard.tp_size, g.shard.pp_size, equal, judged);
  CHECK_MSG(micro.size() == want_micro, "executor tp=%d pp=%d: %zu micro-batch ids, want %zu", g.shard.tp_size,
            g.shard.pp_size, micro.size(), want_micro);
}

// The executor's other semantics while micro-batches are in flight on the devices (pp > 1): prompts cut into chunks
// of 24 tokens (enable_chunked_context; the longer prompts would be refused otherwise), and either a pool of 24
// blocks for the 48 the requests grow to (max_utilization pauses sequences and runs them again) or the streamed copy
// of every case cancelled during the first 8 iterations (none can finish 16 tokens by then, so each is cancelled
// whenever the cancel lands). Every request that runs to the end gives transformers' greedy tokens where the case
// is clear, a cancelled one a prefix of them, and the pool ends with every block free.
void executor_semantics(const Grid& g, const std::string& dir, bool cancel) {
  auto model = leader_or_follow(g, dir, grid_options(g, "auto"));
  if (!model) return;
  json::Value ref = json::parse_file(dir + "/reference.json");
  const auto& cases = ref.find("cases")->as_array();
  ExecutorConfig cfg;
  cfg.max_batch_size = 16;
  cfg.tokens_per_block = 16;
  cfg.enable_chunked_context = true;
  cfg.max_num_tokens = 24;
  if (!cancel) {
    cfg.policy = CapacitySchedulerPolicy::max_utilization;
    cfg.max_tokens_in_paged_kv_cache = 24 * 16;
  }
  auto leader = std::make_unique<LeaderModel>(std::move(model), g.world, kLiveness);
  LeaderModel* lead = leader.get();
  const int32_t depth = lead->pipeline_depth();
  Executor ex(std::move(leader), cfg);
  std::vector<std::pair<RequestId, size_t>> which;
  std::set<RequestId> ids, cancelled;
  int32_t longest = 0;
  ex.hold_iterations(0);
  for (int k = 0; k < 3; ++k)
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Request r = case_request(cases[ci], /*streaming=*/k == 1);
      longest = std::max(longest, static_cast<int32_t>(r.input_token_ids.size()));
      const RequestId id = ex.enqueue(r);
      ids.insert(id);
      which.push_back({id, ci});
      if (cancel && k == 1) cancelled.insert(id);
    }
  if (cancel) {
    ex.hold_iterations(8);
    for (RequestId id : cancelled) ex.cancel(id);
    CHECK(ex.wait_until_held(std::chrono::milliseconds(60000)));
  }
  ex.hold_iterations(-1);
  auto out = cudatest::collect(ex, ids);
  int32_t paused = 0, micro = 0;
  int64_t most_ctx = 0;
  for (const IterationStats& s : ex.get_latest_iteration_stats()) {
    paused += s.inflight_batching_stats.num_paused_requests;
    micro = std::max(micro, s.inflight_batching_stats.micro_batch_id + 1);
    most_ctx = std::max(most_ctx, s.inflight_batching_stats.num_ctx_tokens);
  }
  CHECK(ex.wait_until_idle(std::chrono::milliseconds(60000)));
  const KvCacheStats kv = ex.kv_cache_stats();
  const int32_t active = ex.num_active_requests();
  ex.shutdown();
  lead->release_followers();
  int judged = 0, equal = 0, prefixes = 0;
  for (auto& [id, ci] : which) {
    const std::vector<int32_t> want = ids_of(*cases[ci].find("greedy_output_ids"));
    const cudatest::Outcome& o = out[id];
    const bool was_cancelled = cancelled.count(id) > 0;
    CHECK_MSG(!o.has_error && o.reason == (was_cancelled ? FinishReason::cancelled : FinishReason::length),
              "executor semantics at tp=%d pp=%d: request %lld (cancelled %d): reason %d %s", g.shard.tp_size,
              g.shard.pp_size, static_cast<long long>(id), was_cancelled ? 1 : 0, static_cast<int>(o.reason),
              o.error.c_str());
    if (cases[ci].find("min_top1_margin")->as_number() < 0.05) continue;
    if (was_cancelled) {
      prefixes += o.tokens.size() < want.size() && std::equal(o.tokens.begin(), o.tokens.end(), want.begin()) ? 1 : 0;
      continue;
    }
    ++judged;
    equal += o.tokens == want ? 1 : 0;
  }
  std::printf("executor tp=%d pp=%d, %d micro-batches, chunks of %d tokens (longest prompt %d, most context tokens in "
              "an iteration %lld)%s: %d of %d clear cases give transformers' greedy tokens; %d of %zu cancelled "
              "requests a prefix of them; %d paused-request iterations; pool %d of %d blocks free\n",
              g.shard.tp_size, g.shard.pp_size, micro, cfg.max_num_tokens, longest, static_cast<long long>(most_ctx),
              cancel ? ", the streamed copies cancelled" : ", a pool of 24 blocks", equal, judged, prefixes,
              cancelled.size(), paused, kv.free_num_blocks, kv.max_num_blocks);
  CHECK_MSG(judged > 0 && equal == judged, "executor semantics tp=%d pp=%d: %d of %d", g.shard.tp_size,
            g.shard.pp_size, equal, judged);
  CHECK(longest > cfg.max_num_tokens && most_ctx <= cfg.max_num_tokens);
  CHECK(micro == std::min(2, depth));
  if (cancel) CHECK(prefixes == static_cast<int>(cancelled.size()));
  if (!cancel) CHECK_MSG(paused > 0, "a pool of 24 blocks: no request paused");
  CHECK(kv.free_num_blocks == kv.max_num_blocks && kv.used_num_blocks == 0 && active == 0);
}

// Offline throughput on the grid through the executor in leader mode: `requests` greedy requests of 128 prompt
// tokens (random ids) and 128 output tokens, enqueued at once after a small warm-up batch.
void offline(const Grid& g, const std::string& dir, int requests, int32_t ep, int32_t micro_batches,
             int32_t max_batch) {
  LoadOptions lo = grid_options(g, "dummy", ep);
  lo.max_num_tokens = 8192;
  lo.max_batch_size = max_batch;
  auto model = leader_or_follow(g, dir, lo);
  if (!model) return;
  ExecutorConfig cfg;
  cfg.max_batch_size = max_batch;
  cfg.max_num_tokens = 8192;
  cfg.tokens_per_block = 64;
  cfg.pp_micro_batches = micro_batches;
  auto leader = std::make_unique<LeaderModel>(std::move(model), g.world, kLiveness);
  LeaderModel* lead = leader.get();
  Executor ex(std::move(leader), cfg);
  const cudatest::OfflineResult res = cudatest::run_offline(ex, requests, 128, 128, 32, false);
  ex.shutdown();
  lead->release_followers();  // as the addon does once its executor stopped: the followers return
  std::printf("offline tp=%d pp=%d ep=%d micro-batches %d (leader mode, C++): %d requests 128/128, max batch %d: "
              "%lld output tokens in %.2f s = %.0f output tokens/s (%d failed)\n",
              g.shard.tp_size, g.shard.pp_size, ep, micro_batches, requests, max_batch,
              static_cast<long long>(res.tokens), res.seconds, res.tokens / res.seconds, res.failed);
}

// Correctness on the grid: the all-reduce paths, every model shape against one GPU, the executor's greedy tokens.
void run_checks(const Grid& g) {
  check_all_reduce(g);
  compare(g, check::repo_root + "/test/fixtures/models/tiny-llama", "auto", "tiny-llama");
  compare(g, check::repo_root + "/test/fixtures/models/tiny-gpt2", "auto", "tiny-gpt2");
  const std::string dir = cudatest::write_config("llama-tp", R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1001, "max_position_embeddings": 2048,
    "tie_word_embeddings": false, "mlp_bias": true, "attention_bias": true})");
  compare(g, dir, "dummy", "llama-gqa-bias");
  compare(g, dir, "dummy", "llama-gqa-bias + 2 LoRA adapters", 1, true);
  // Mixture-of-experts shapes (issue 25), each expert's columns split over tp (moe_tp = tp) and, with ep = tp,
  // whole experts spread over the ranks. Every token takes every expert (top k = all, as cuda-model's): the split
  // changes bf16 summation order, and a near-tied dummy router must not turn that into another expert.
  const std::string moe = cudatest::write_config("qwen2-moe-tp", R"({"architectures": ["Qwen2MoeForCausalLM"],
    "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128, "shared_expert_intermediate_size": 256,
    "num_experts": 8, "num_experts_per_tok": 8, "mlp_only_layers": [0], "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1001, "max_position_embeddings": 2048,
    "tie_word_embeddings": false})");
  compare(g, moe, "dummy", "qwen2-moe");
  if (g.shard.tp_size > 1) compare(g, moe, "dummy", "qwen2-moe", g.shard.tp_size);
  // Gemma 2's shape (issue 25): alternate windowed layers shorter than the prompt, soft-capped scores and logits,
  // the post norms of an all-reduced projection.
  const std::string gemma2 = cudatest::write_config("gemma2-tp", R"({"architectures": ["Gemma2ForCausalLM"],
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1001, "max_position_embeddings": 2048,
    "sliding_window": 48, "query_pre_attn_scalar": 80, "attn_logit_softcapping": 0.5, "final_logit_softcapping": 2.0})");
  compare(g, gemma2, "dummy", "gemma2-window");
  // The executor on the grid: pipelined at pp > 1, and with the stages one after the other.
  executor_greedy(g, check::repo_root + "/test/fixtures/models/tiny-llama", 0);
  if (g.shard.pp_size > 1) {
    executor_greedy(g, check::repo_root + "/test/fixtures/models/tiny-llama", 1);
    executor_greedy(g, check::repo_root + "/test/fixtures/models/tiny-llama", 0, 4);
    executor_semantics(g, check::repo_root + "/test/fixtures/models/tiny-llama", /*cancel=*/false);
    executor_semantics(g, check::repo_root + "/test/fixtures/models/tiny-llama", /*cancel=*/true);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress reaches a log even if the run is cut short
  if (argc < 4) {
    std::fprintf(stderr, "usage: cuda-parallel <repo> <tp> <pp> [--bench <config dir> [--offline N]] [--ep E] "
                         "[--micro-batches M] [--max-batch B]\n");
    return 2;
  }
  check::repo_root = argv[1];
  comm_init(true);
  const Grid g = make_grid(std::atoi(argv[2]), std::atoi(argv[3]));
  if (!cuda_backend_built() || cuda_device_count() < g.world.size()) {
    // Every rank returns the skip code (mpirun then exits with it); rank 0 says why.
    if (g.world.rank() == 0)
      std::printf("SKIP: %s; GPUs visible: %d for %d ranks\n", cuda_backend_status(), cuda_device_count(),
                  g.world.size());
    comm_finalize();
    return check::skip_code;
  }
  const bool bench_only = argc > 5 && std::string(argv[4]) == "--bench";  // (check.sh ran the checks already)
  try {
    if (!bench_only) run_checks(g);
    // --ep E (after the other arguments): the bench and offline runs split the experts over E groups.
    // --micro-batches M: the offline run's pp_micro_batches (0: one per stage; 1: not pipelined); --max-batch B:
    // its max batch size (of each micro-batch; default 256).
    int32_t ep = 1, micro_batches = 0, max_batch = 256;
    for (int i = 4; i + 1 < argc; ++i) {
      if (std::string(argv[i]) == "--ep") ep = std::atoi(argv[i + 1]);
      if (std::string(argv[i]) == "--micro-batches") micro_batches = std::atoi(argv[i + 1]);
      if (std::string(argv[i]) == "--max-batch") max_batch = std::atoi(argv[i + 1]);
    }
    if (bench_only) {
      if (std::getenv("AR_SWEEP") != nullptr) all_reduce_sweep(g);
      bench(g, argv[5], ep);
    }
    if (argc > 7 && std::string(argv[6]) == "--offline")
      offline(g, argv[5], std::atoi(argv[7]), ep, micro_batches, max_batch);
  } catch (const std::exception& e) {
    comm_abort(3, std::string("rank ") + std::to_string(g.world.rank()) + ": " + e.what());
  }
  if (g.world.rank() == 0) std::printf("%d checks passed, %d failed\n", check::passes, check::failures);
  const int failed = check::failures;
  comm_finalize();
  return failed == 0 ? 0 : 1;
}

