// AddonExecutor: the JS handle of one engine::Executor. Created only through loadExecutor() (a Promise: model
// loading runs on a worker thread); responses reach JS through a ThreadSafeFunction, one call per iteration batch.
#pragma once
#include <napi.h>

#include <memory>
#include <mutex>

#include "executor/executor.h"
#include "parallel/leader-model.h"

namespace addon {

class AddonExecutor : public Napi::ObjectWrap<AddonExecutor> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit AddonExecutor(const Napi::CallbackInfo& info);
  ~AddonExecutor() override;

  // Called by the load worker once the engine exists.
  void attach(std::unique_ptr<engine::Executor> executor, Napi::ThreadSafeFunction on_responses,
              engine::LeaderModel* leader);

 private:
  Napi::Value enqueue(const Napi::CallbackInfo& info);
  Napi::Value cancel(const Napi::CallbackInfo& info);
  Napi::Value get_latest_iteration_stats(const Napi::CallbackInfo& info);
  Napi::Value kv_cache_stats(const Napi::CallbackInfo& info);
  // getLatestKvCacheEvents() drains the executor's KV cache events; kvCacheEventsDropped() counts those a full
  // buffer dropped.
  Napi::Value get_latest_kv_cache_events(const Napi::CallbackInfo& info);
  Napi::Value kv_cache_events_dropped(const Napi::CallbackInfo& info);
  Napi::Value num_active_requests(const Napi::CallbackInfo& info);
  Napi::Value model_config(const Napi::CallbackInfo& info);
  Napi::Value shutdown(const Napi::CallbackInfo& info);
  // The executor's test hook (engine::Executor::hold_iterations): holdIterations(n) and
  // awaitHeld(timeoutMs) -> Promise<boolean>, which resolves after every response delivered before it.
  Napi::Value hold_iterations(const Napi::CallbackInfo& info);
  Napi::Value await_held(const Napi::CallbackInfo& info);

  engine::Executor& live(Napi::Env env);
  static void cleanup_hook(AddonExecutor* self);
  void stop_now();  // synchronous shutdown (env teardown / GC)

  std::shared_ptr<engine::Executor> executor_;
  Napi::ThreadSafeFunction on_responses_;
  engine::LeaderModel* leader_ = nullptr;  // set on world rank 0 of a multi-rank job; owned by executor_
  bool released_ = false;
  bool shutting_down_ = false;
  Napi::Env env_;
};

// loadExecutor(modelDir, executorConfig, loadOptions, onResponses, onProgress?) -> Promise<AddonExecutor>
Napi::Value load_executor(const Napi::CallbackInfo& info);
// readModelConfig(modelDir) -> model config object (sync; reads config.json only)
Napi::Value read_model_config(const Napi::CallbackInfo& info);

}  // namespace addon
