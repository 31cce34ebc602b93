#include "addon-executor.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "addon-args.h"
#include "addon-convert.h"
#include "addon-errors.h"
#include "addon-liveness.h"
#include "addon-parallel.h"
#include "addon-progress.h"
#include "comm/comm.h"
#include "loading/load-agreement.h"
#include "eagle/eagle-checkpoint.h"
#include "medusa/medusa-checkpoint.h"
#include "parallel/leader-model.h"

namespace addon {
namespace {

// After the loop thread is joined: followers leave their loop, and every rank ends MPI together.
// A process started by an MPI launcher must finalize before it exits (mpirun reports anything else as a crash),
// also as a job of one rank.
void release_followers(engine::LeaderModel* leader) {
  if (leader != nullptr) leader->release_followers();
  engine::comm_finalize();
}

// Delivers one iteration's responses to the JS callback on the main thread.
void deliver(Napi::Env env, Napi::Function callback, std::vector<engine::Response>* batch) {
  std::unique_ptr<std::vector<engine::Response>> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;
  Napi::Array array = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); ++i) array.Set(static_cast<uint32_t>(i), from_response(env, (*owned)[i]));
  callback.Call({array});
}

// Loads the model and builds the executor off the main thread; resolves with an AddonExecutor.
class LoadWorker : public Napi::AsyncWorker {
 public:
  LoadWorker(Napi::Env env, std::string dir, std::string draft_dir, std::string medusa_dir, std::string eagle_dir,
             engine::ExecutorConfig config,
             int32_t num_threads,
             int32_t tp, int32_t pp, int32_t ep, DeviceFields device, engine::LivenessSettings liveness,
             Napi::ThreadSafeFunction on_responses, Napi::ThreadSafeFunction on_progress, bool has_progress)
      : Napi::AsyncWorker(env, "trtllm.loadExecutor"), deferred_(Napi::Promise::Deferred::New(env)),
        dir_(std::move(dir)), draft_dir_(std::move(draft_dir)), medusa_dir_(std::move(medusa_dir)), eagle_dir_(std::move(eagle_dir)), config_(config), num_threads_(num_threads), tp_(tp), pp_(pp), ep_(ep), device_(std::move(device)),
        liveness_(liveness), on_responses_(on_responses),
        on_progress_(on_progress), has_progress_(has_progress) {}

  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      engine::LoadOptions options = parallel_load_options(num_threads_, tp_, pp_, ep_);
      device_.apply(options);
      if (has_progress_) {
        options.progress = [](void* user, uint64_t done, uint64_t total) {
          auto* self = static_cast<LoadWorker*>(user);
          self->on_progress_.NonBlockingCall(new Progress(done, total), deliver_progress);
        };
        options.progress_user = this;
      }
      // EAGLE heads read the model's final hidden states on the host: refused before anything loads elsewhere.
      if (!eagle_dir_.empty() && engine::resolve_device(options.device) != engine::Device::cpu)
        throw engine::EngineError(engine::ErrorCode::unsupported,
                                  "EAGLE heads run on the CPU backend for now; on CUDA use --medusa-heads or --draft-model");
      std::unique_ptr<engine::Model> model = engine::load_model_collective(dir_, options);
      if (engine::comm_info().mpi && engine::comm_info().world_size > 1) {
        // World rank 0 leads: every KV action and forward pass goes out to the followers first.
        auto leader = std::make_unique<engine::LeaderModel>(std::move(model), engine::comm_world(), liveness_);
        leader_ = leader.get();
        model = std::move(leader);
      }
      // Medusa heads run where the final hidden states are: on this (the leading) rank, or under pp on the last
      // stage, which loads them too (the leader then keeps their count: LeaderModel::set_medusa_heads).
      if (!medusa_dir_.empty())
        model->set_medusa_heads(std::make_shared<const engine::MedusaHeads>(engine::load_medusa_heads(medusa_dir_, model->config())));
      // The draft model runs on this (the leading) rank alone: one shard, no communicator, the model's device.
      std::unique_ptr<engine::Model> draft;
      if (!draft_dir_.empty()) {
        engine::LoadOptions d;
        d.num_threads = num_threads_;
        device_.apply(d);
        d.shard.pp_layers.clear();
        draft = engine::load_model(draft_dir_, d);
      } else if (!eagle_dir_.empty()) {  // EAGLE heads: a draft on this rank that reads the model's hidden states
        draft = engine::load_eagle_heads(eagle_dir_, dir_, model->config(), num_threads_);
      }
      executor_ = std::make_unique<engine::Executor>(std::move(model), config_, std::move(draft));
      Napi::ThreadSafeFunction tsfn = on_responses_;
      executor_->set_response_callback([tsfn](std::vector<engine::Response>&& responses) mutable {
        tsfn.NonBlockingCall(new std::vector<engine::Response>(std::move(responses)), deliver);
      });
    } catch (const engine::EngineError& e) {
      code_ = engine::error_code_name(e.code());
      SetError(e.what());
    } catch (const std::exception& e) {
      code_ = "internal";
      SetError(e.what());
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    release_progress();
    Napi::Object handle = addon_data(env).executor_class.New({});
    AddonExecutor::Unwrap(handle)->attach(std::move(executor_), on_responses_, leader_);
    deferred_.Resolve(handle);
  }

  void OnError(const Napi::Error& error) override {
    Napi::Env env = Env();
    release_progress();
    on_responses_.Release();
    deferred_.Reject(make_error(env, code_, error.Message()).Value());
  }

 private:
  void release_progress() {
    if (has_progress_) on_progress_.Release();
  }
  Napi::Promise::Deferred deferred_;
  std::string dir_, draft_dir_, medusa_dir_, eagle_dir_;
  engine::ExecutorConfig config_;
  int32_t num_threads_, tp_, pp_, ep_;
  DeviceFields device_;
  engine::LivenessSettings liveness_;
  engine::LeaderModel* leader_ = nullptr;  // owned by executor_
  Napi::ThreadSafeFunction on_responses_;
  Napi::ThreadSafeFunction on_progress_;
  bool has_progress_;
  std::unique_ptr<engine::Executor> executor_;
  std::string code_ = "internal";
};

// Joins the executor's loop thread off the main thread: shutdown cancels running requests, whose final responses
// must still reach JS before the promise resolves.
class ShutdownWorker : public Napi::AsyncWorker {
 public:
  ShutdownWorker(Napi::Env env, std::shared_ptr<engine::Executor> executor, Napi::ThreadSafeFunction tsfn,
                 engine::LeaderModel* leader)
      : Napi::AsyncWorker(env, "trtllm.shutdown"), deferred_(Napi::Promise::Deferred::New(env)),
        executor_(std::move(executor)), tsfn_(tsfn), leader_(leader) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      executor_->shutdown();
      release_followers(leader_);
      executor_->free_models();  // the GPU's memory back before the promise resolves: another model may load next
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    // Queued response deliveries run before this release completes; the promise resolves after them.
    tsfn_.Release();
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& error) override {
    tsfn_.Release();
    deferred_.Reject(make_error(Env(), "internal", error.Message()).Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<engine::Executor> executor_;
  Napi::ThreadSafeFunction tsfn_;
  engine::LeaderModel* leader_;
};

// awaitHeld: waits off the main thread until the loop holds, then resolves through the responses' own
// ThreadSafeFunction, so every batch the held iterations delivered reaches JS before the promise resolves (an
// AsyncWorker's completion may overtake queued TSFN calls).
class AwaitHeldWorker : public Napi::AsyncWorker {
 public:
  AwaitHeldWorker(Napi::Env env, std::shared_ptr<engine::Executor> executor, Napi::ThreadSafeFunction tsfn,
                  std::chrono::milliseconds timeout)
      : Napi::AsyncWorker(env, "trtllm.awaitHeld"), state_(new State{Napi::Promise::Deferred::New(env), false}),
        executor_(std::move(executor)), tsfn_(tsfn), timeout_(timeout) {}
  ~AwaitHeldWorker() override { delete state_; }
  // Keeps the TSFN alive until OnOK / OnError; false: it is closing (the executor is shutting down).
  bool acquire() { return tsfn_.Acquire() == napi_ok; }
  Napi::Promise promise() { return state_->deferred.Promise(); }

  void Execute() override {
    state_->held = executor_->wait_until_held(timeout_);
    State* state = state_;
    if (tsfn_.NonBlockingCall(state, [](Napi::Env env, Napi::Function, State* s) {
          s->deferred.Resolve(Napi::Boolean::New(env, s->held));
          delete s;
        }) == napi_ok)
      state_ = nullptr;  // the call owns it now
  }
  void OnOK() override {
    if (state_ != nullptr) state_->deferred.Resolve(Napi::Boolean::New(Env(), false));  // the TSFN was closing
    tsfn_.Release();
  }
  void OnError(const Napi::Error& error) override {
    if (state_ != nullptr) state_->deferred.Reject(error.Value());
    tsfn_.Release();
  }

 private:
  struct State {
    Napi::Promise::Deferred deferred;
    bool held;
  };
  State* state_;
  std::shared_ptr<engine::Executor> executor_;
  Napi::ThreadSafeFunction tsfn_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Napi::Function AddonExecutor::define(Napi::Env env) {
  return DefineClass(env, "AddonExecutor",
                     {InstanceMethod<&AddonExecutor::enqueue>("enqueue"),
                      InstanceMethod<&AddonExecutor::cancel>("cancel"),
                      InstanceMethod<&AddonExecutor::get_latest_iteration_stats>("getLatestIterationStats"),
                      InstanceMethod<&AddonExecutor::kv_cache_stats>("kvCacheStats"),
                      InstanceMethod<&AddonExecutor::get_latest_kv_cache_events>("getLatestKvCacheEvents"),
                      InstanceMethod<&AddonExecutor::kv_cache_events_dropped>("kvCacheEventsDropped"),
                      InstanceMethod<&AddonExecutor::num_active_requests>("numActiveRequests"),
                      InstanceMethod<&AddonExecutor::model_config>("modelConfig"),
                      InstanceMethod<&AddonExecutor::shutdown>("shutdown"),
                      InstanceMethod<&AddonExecutor::hold_iterations>("holdIterations"),
                      InstanceMethod<&AddonExecutor::await_held>("awaitHeld")});
}

AddonExecutor::AddonExecutor(const Napi::CallbackInfo& info) : Napi::ObjectWrap<AddonExecutor>(info), env_(info.Env()) {
  // Threads must be joined before the environment goes away (worker exit, process exit).
  napi_add_env_cleanup_hook(env_, reinterpret_cast<void (*)(void*)>(&AddonExecutor::cleanup_hook), this);
}

AddonExecutor::~AddonExecutor() {
  napi_remove_env_cleanup_hook(env_, reinterpret_cast<void (*)(void*)>(&AddonExecutor::cleanup_hook), this);
  stop_now();
}

void AddonExecutor::cleanup_hook(AddonExecutor* self) { self->stop_now(); }

void AddonExecutor::stop_now() {
  if (executor_ && !shutting_down_) {
    shutting_down_ = true;
    executor_->shutdown();
    release_followers(leader_);
    executor_->free_models();
  }
  if (executor_ && !released_) {
    released_ = true;
    on_responses_.Release();
  }
}

void AddonExecutor::attach(std::unique_ptr<engine::Executor> executor, Napi::ThreadSafeFunction on_responses,
                           engine::LeaderModel* leader) {
  executor_ = std::move(executor);
  on_responses_ = on_responses;
  leader_ = leader;
}

engine::Executor& AddonExecutor::live(Napi::Env env) {
  if (!executor_) throw make_error(env, "internal", "executor is not loaded");
  if (shutting_down_) throw make_error(env, "shutdown", "the executor has been shut down");
  return *executor_;
}

Napi::Value AddonExecutor::enqueue(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  engine::Executor& executor = live(env);
  engine::Request request = to_request(env, require_object(info, 0, "request"), executor);
  try {
    return Napi::Number::New(env, static_cast<double>(executor.enqueue(request)));
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
}

Napi::Value AddonExecutor::cancel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double id = require_arg(info, 0, napi_number, "requestId").As<Napi::Number>().DoubleValue();
  if (executor_ && !shutting_down_) executor_->cancel(static_cast<engine::RequestId>(id));
  return env.Undefined();
}

Napi::Value AddonExecutor::get_latest_iteration_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!executor_) return Napi::Array::New(env);
  std::deque<engine::IterationStats> stats = executor_->get_latest_iteration_stats();
  Napi::Array out = Napi::Array::New(env, stats.size());
  for (size_t i = 0; i < stats.size(); ++i) out.Set(static_cast<uint32_t>(i), from_iteration_stats(env, stats[i]));
  return out;
}

Napi::Value AddonExecutor::kv_cache_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!executor_) throw make_error(env, "internal", "executor is not loaded");
  return from_kv_cache_stats(env, executor_->kv_cache_stats());
}

Napi::Value AddonExecutor::get_latest_kv_cache_events(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!executor_) return Napi::Array::New(env);
  std::deque<engine::KvCacheEvent> events = executor_->get_latest_kv_cache_events();
  Napi::Array out = Napi::Array::New(env, events.size());
  for (size_t i = 0; i < events.size(); ++i) out.Set(static_cast<uint32_t>(i), from_kv_cache_event(env, events[i]));
  return out;
}

Napi::Value AddonExecutor::kv_cache_events_dropped(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, executor_ ? static_cast<double>(executor_->kv_cache_events_dropped()) : 0);
}

Napi::Value AddonExecutor::num_active_requests(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, executor_ ? executor_->num_active_requests() : 0);
}

Napi::Value AddonExecutor::model_config(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!executor_) throw make_error(env, "internal", "executor is not loaded");
  return from_model_config(env, executor_->model_config(), executor_->kv_cache_dtype(), executor_->tp_all_reduce(),
                           executor_->pp_micro_batches());
}

Napi::Value AddonExecutor::shutdown(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!executor_ || shutting_down_) {
    Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env);
    done.Resolve(env.Undefined());
    return done.Promise();
  }
  shutting_down_ = true;
  released_ = true;  // the worker releases the TSFN once the loop thread is joined
  auto* worker = new ShutdownWorker(env, executor_, on_responses_, leader_);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Value AddonExecutor::hold_iterations(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int64_t n = require_integer(info, 0, "n");
  live(env).hold_iterations(n);
  return env.Undefined();
}

Napi::Value AddonExecutor::await_held(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double ms = require_arg(info, 0, napi_number, "timeoutMs").As<Napi::Number>().DoubleValue();
  if (!(ms >= 0 && ms <= 2147483647.0))
    throw make_error(env, "invalid_argument",
                     "argument 'timeoutMs' must be a number of milliseconds in [0, 2^31), got " + std::to_string(ms));
  live(env);
  auto* worker = new AwaitHeldWorker(env, executor_, on_responses_, std::chrono::milliseconds(static_cast<int64_t>(ms)));
  Napi::Promise promise = worker->promise();
  if (released_ || !worker->acquire()) {
    // Shutting down: the loop will never hold again.
    Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env);
    done.Resolve(Napi::Boolean::New(env, false));
    delete worker;
    return done.Promise();
  }
  worker->Queue();
  return promise;
}

Napi::Value load_executor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string dir = require_string(info, 0, "modelDir");
  engine::ExecutorConfig config = to_executor_config(env, require_object(info, 1, "executorConfig"));
  Napi::Object load_options = require_object(info, 2, "loadOptions");
  int32_t num_threads = to_num_threads(env, load_options);
  Fields parallel(env, load_options, "");
  const auto tp = static_cast<int32_t>(parallel.integer("tp", 1));
  const auto pp = static_cast<int32_t>(parallel.integer("pp", 1));
  const auto ep = static_cast<int32_t>(parallel.integer("ep", 1));
  const std::string draft_dir = parallel.string("draftModel", "");
  const std::string medusa_dir = parallel.string("medusaHeads", "");
  const std::string eagle_dir = parallel.string("eagleHeads", "");
  Napi::Function on_responses = require_function(info, 3, "onResponses");
  bool has_progress = info.Length() > 4 && info[4].IsFunction();
  // Every option is read before the thread-safe functions exist: one made and then left by a throw keeps the
  // event loop alive, so a load refused for a bad option would hang its process.
  DeviceFields device = to_device_fields(env, load_options, &config);
  const engine::LivenessSettings liveness = to_liveness_settings(env, load_options);
  Napi::ThreadSafeFunction responses_tsfn =
      Napi::ThreadSafeFunction::New(env, on_responses, "trtllm.responses", 0, 1);
  Napi::ThreadSafeFunction progress_tsfn;
  if (has_progress) {
    progress_tsfn = Napi::ThreadSafeFunction::New(env, info[4].As<Napi::Function>(), "trtllm.progress", 0, 1);
  }
  auto* worker = new LoadWorker(env, dir, draft_dir, medusa_dir, eagle_dir, config, num_threads, tp, pp, ep, std::move(device), liveness,
                                responses_tsfn, progress_tsfn, has_progress);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Value read_model_config(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string dir = require_string(info, 0, "modelDir");
  try {
    return from_model_config(env, engine::load_model_config(dir), "");
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
}

}  // namespace addon
