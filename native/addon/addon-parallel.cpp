#include "addon-parallel.h"

#include <limits>
#include <string>
#include <utility>

#include "addon-args.h"
#include "addon-convert.h"
#include "addon-errors.h"
#include "addon-liveness.h"
#include "addon-progress.h"
#include "comm/comm.h"
#include "errors.h"
#include "loading/load-agreement.h"
#include "medusa/medusa-checkpoint.h"
#include "parallel/leader-model.h"
#include "parallel/parallel-grid.h"
#include "parallel/parallel-layout.h"

namespace addon {

engine::LoadOptions parallel_load_options(int32_t num_threads, int32_t tp, int32_t pp, int32_t ep) {
  engine::LoadOptions options;
  options.num_threads = num_threads;
  // (ep is checked against tp and the model by make_parallel_layout, the same verdict on every rank.)
  options.shard.ep_size = ep;
  // make_parallel_grid checks the same; here first, so the message can say how the ranks were (not) started.
  if (tp < 1 || pp < 1) {
    throw engine::EngineError(engine::ErrorCode::invalid_argument,
                              "tp and pp must be >= 1, got tp " + std::to_string(tp) + ", pp " + std::to_string(pp));
  }
  const engine::CommInfo info = engine::comm_info();
  const int32_t world = info.mpi ? info.world_size : 1;
  if (tp * pp != world) {
    throw engine::EngineError(engine::ErrorCode::invalid_argument,
                              "tp " + std::to_string(tp) + " x pp " + std::to_string(pp) + " = " + std::to_string(tp * pp) +
                                  " does not match the " + std::to_string(world) + " rank(s) started" +
                                  (info.mpi ? " by mpirun/srun" : " (no MPI: start the ranks with mpirun or srun)"));
  }
  if (world == 1) return options;
  engine::ParallelGrid grid = engine::make_parallel_grid(engine::comm_world(), tp, pp);
  options.shard = grid.shard;
  options.shard.ep_size = ep;
  options.tp_comm = std::move(grid.tp);
  options.pp_comm = std::move(grid.pp);
  return options;
}

Napi::Object comm_info_object(Napi::Env env, const engine::CommInfo& c) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("mpi", c.mpi);
  o.Set("worldRank", c.world_rank);
  o.Set("worldSize", c.world_size);
  o.Set("localRank", c.local_rank);
  o.Set("localSize", c.local_size);
  o.Set("host", c.host);
  o.Set("library", c.library);
  o.Set("jobRank", c.job_rank);
  o.Set("jobSize", c.job_size);
  o.Set("spawned", c.spawned);
  return o;
}

Napi::Value comm_init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const bool use_mpi = require_arg(info, 0, napi_boolean, "useMpi").As<Napi::Boolean>().Value();
  const bool multiple = info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
  try {
    return comm_info_object(env, engine::comm_init(use_mpi, multiple));
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
}

Napi::Value comm_finalize(const Napi::CallbackInfo& info) {
  engine::comm_finalize();
  return info.Env().Undefined();
}

Napi::Value check_parallel_layout(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string dir = require_string(info, 0, "modelDir");
  const int64_t tp = require_integer(info, 1, "tp"), pp = require_integer(info, 2, "pp");
  const int64_t ep = info.Length() > 3 && !info[3].IsUndefined() ? require_integer(info, 3, "ep") : 1;
  const std::string pp_layers = info.Length() > 4 && !info[4].IsUndefined() ? require_string(info, 4, "ppLayers") : "";
  const int64_t most = std::numeric_limits<int32_t>::max();
  if (ep > most || ep < 1)
    throw make_error(env, "invalid_argument", "ep must be between 1 and " + std::to_string(most) + ", got " + std::to_string(ep));
  if (tp > most || pp > most) {
    throw make_error(env, "invalid_argument", "tp and pp must be at most " + std::to_string(most) + ", got tp " +
                                                  std::to_string(tp) + ", pp " + std::to_string(pp));
  }
  try {
    engine::ShardInfo grid;
    grid.tp_size = static_cast<int32_t>(tp);
    grid.pp_size = static_cast<int32_t>(pp);
    grid.ep_size = static_cast<int32_t>(ep);
    grid.pp_layers = pp_layers;
    // The split's rules do not depend on which rank asks (every rank reaches the same verdict): rank 0's is all.
    engine::make_parallel_layout(engine::load_model_config(dir), grid);
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
  return env.Undefined();
}

namespace {

// A follower's whole life on a worker thread: load its shard (collectively with the other ranks), then apply the
// leader's plans until the leader shuts down; the promise resolves then.
class FollowerWorker : public Napi::AsyncWorker {
 public:
  FollowerWorker(Napi::Env env, std::string dir, std::string medusa_dir, int32_t threads, int32_t tp, int32_t pp,
                 int32_t ep, DeviceFields device, engine::LivenessSettings liveness, Napi::ThreadSafeFunction progress,
                 bool has_progress)
      : Napi::AsyncWorker(env, "trtllm.runFollower"), deferred_(Napi::Promise::Deferred::New(env)), dir_(std::move(dir)),
        medusa_dir_(std::move(medusa_dir)), threads_(threads), tp_(tp), pp_(pp), ep_(ep), device_(std::move(device)), liveness_(liveness), progress_(progress),
        has_progress_(has_progress) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      engine::LoadOptions options = parallel_load_options(threads_, tp_, pp_, ep_);
      device_.apply(options);
      if (has_progress_) {
        options.progress = [](void* user, uint64_t done, uint64_t total) {
          static_cast<FollowerWorker*>(user)->progress_.NonBlockingCall(new Progress(done, total),
                                                                         deliver_progress);
        };
        options.progress_user = this;
      }
      std::unique_ptr<engine::Model> model = engine::load_model_collective(dir_, options);
      if (has_progress_) {
        progress_.Release();
        has_progress_ = false;
      }
      // Under pp the last stage's first rank runs the leader's Medusa heads (LeaderModel::head_guesses).
      if (!medusa_dir_.empty() && model->serves_head_guesses())
        model->set_medusa_heads(
            std::make_shared<const engine::MedusaHeads>(engine::load_medusa_heads(medusa_dir_, model->config())));
      engine::follower_loop(*model, engine::comm_world(), liveness_);
      model.reset();
      engine::comm_finalize();
    } catch (const engine::EngineError& e) {
      code_ = engine::error_code_name(e.code());
      SetError(e.what());
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    if (has_progress_) progress_.Release();
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& error) override {
    if (has_progress_) progress_.Release();
    deferred_.Reject(make_error(Env(), code_, error.Message()).Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string dir_, medusa_dir_;
  int32_t threads_, tp_, pp_, ep_;
  DeviceFields device_;
  engine::LivenessSettings liveness_;
  Napi::ThreadSafeFunction progress_;
  bool has_progress_;
  std::string code_ = "internal";
};

}  // namespace

Napi::Value run_follower(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string dir = require_string(info, 0, "modelDir");
  Fields f(env, require_object(info, 1, "loadOptions"), "");
  const auto threads = static_cast<int32_t>(f.integer("numThreads", 0));
  const auto tp = static_cast<int32_t>(f.integer("tp", 1));
  const auto pp = static_cast<int32_t>(f.integer("pp", 1));
  const auto ep = static_cast<int32_t>(f.integer("ep", 1));
  const std::string medusa_dir = f.string("medusaHeads", "");
  const bool has_progress = info.Length() > 2 && info[2].IsFunction();
  // Options first: a thread-safe function left behind by a throw would keep the process alive (load_executor).
  DeviceFields device = to_device_fields(env, require_object(info, 1, "loadOptions"), nullptr);
  const engine::LivenessSettings liveness = to_liveness_settings(env, require_object(info, 1, "loadOptions"));
  Napi::ThreadSafeFunction progress;
  if (has_progress) progress = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "trtllm.progress", 0, 1);
  auto* worker =
      new FollowerWorker(env, dir, medusa_dir, threads, tp, pp, ep, std::move(device), liveness, progress, has_progress);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

}  // namespace addon
