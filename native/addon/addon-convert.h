// JS object <-> engine struct conversions. Field names are the camelCase ones of worker/binding/addon-types.ts.
#pragma once
#include <napi.h>

#include "executor.h"
#include "model-config.h"
#include "request.h"

namespace addon {

engine::Request to_request(Napi::Env env, Napi::Object object);
engine::ExecutorConfig to_executor_config(Napi::Env env, Napi::Object object);
int32_t to_num_threads(Napi::Env env, Napi::Object object);

Napi::Object from_response(Napi::Env env, const engine::Response& response);
Napi::Object from_iteration_stats(Napi::Env env, const engine::IterationStats& stats);
Napi::Object from_kv_cache_stats(Napi::Env env, const engine::KvCacheStats& stats);
Napi::Object from_model_config(Napi::Env env, const engine::ModelConfig& config);

}  // namespace addon
