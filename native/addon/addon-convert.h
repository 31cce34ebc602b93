// JS object <-> engine struct conversions. Field names are the camelCase ones of worker/binding/addon-types.ts.
#pragma once
#include <napi.h>

#include <string>

#include "executor/executor.h"
#include "model/model-config.h"
#include "model/model.h"
#include "scheduling/request.h"

namespace addon {

// `executor`: the model and cache limits a request's LoRA tensors (lora.weights / lora.config) are read against
// (lora_from_tensors); an engine error there is thrown as the JS error of its code.
engine::Request to_request(Napi::Env env, Napi::Object object, const engine::Executor& executor);
engine::ExecutorConfig to_executor_config(Napi::Env env, Napi::Object object);
int32_t to_num_threads(Napi::Env env, Napi::Object object);

// The load options that pick and size the backend: device ("auto" | "cpu" | "cuda"; absent: cpu), loadFormat
// ("auto" | "dummy"), quantization ("none" | "fp8"), kvCacheDtype ("auto" | "fp8"), dtype, gpuDeviceId, and the
// activation sizing hints maxNumTokens / maxBatchSize (the executor config's when a leader loads, the load options'
// on a follower). Parsed on the JS thread, applied on the loader's.
struct DeviceFields {
  engine::Device device = engine::Device::cpu;
  std::string load_format = "auto", dtype = "auto", quantization, kv_cache_dtype = "auto";
  int32_t gpu_device = -1;
  int32_t max_num_tokens = 8192, max_batch_size = 64;
  std::string pp_layers;  // ShardInfo::pp_layers (the grid itself comes from parallel_load_options)
  void apply(engine::LoadOptions& o) const {
    o.shard.pp_layers = pp_layers;
    o.device = device;
    o.load_format = load_format;
    o.quantization = quantization;
    o.kv_cache_dtype = kv_cache_dtype;
    o.dtype = dtype;
    o.gpu_device = gpu_device;
    o.max_num_tokens = max_num_tokens;
    o.max_batch_size = max_batch_size;
  }
};
DeviceFields to_device_fields(Napi::Env env, Napi::Object load_options, const engine::ExecutorConfig* config);

// Moves the response's logits into the JS object (no copy): `response` is spent afterwards.
Napi::Object from_response(Napi::Env env, engine::Response& response);
Napi::Object from_iteration_stats(Napi::Env env, const engine::IterationStats& stats);
Napi::Object from_kv_cache_stats(Napi::Env env, const engine::KvCacheStats& stats);
// addon-types.ts's KvCacheEvent; block hashes as decimal strings (exact, unlike a JS number past 2^53).
Napi::Object from_kv_cache_event(Napi::Env env, const engine::KvCacheEvent& event);
Napi::Object from_model_config(Napi::Env env, const engine::ModelConfig& config, const std::string& kv_cache_dtype,
                               const std::string& tp_all_reduce = "", int32_t pp_micro_batches = 1);

}  // namespace addon
