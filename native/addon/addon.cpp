// The addon's export list, mirrored one-to-one by worker/binding/addon-types.ts (a test checks they match).
#include <napi.h>

#include "addon-args.h"
#include "addon-errors.h"
#include "addon-executor.h"
#include "addon-links.h"
#include "addon-liveness.h"
#include "addon-parallel.h"
#include "addon-process.h"
#include "cuda/cuda-backend.h"

namespace addon {
namespace {

// setErrorClass(TrtllmNativeError): native failures are thrown as instances of this class.
Napi::Value set_error_class(const Napi::CallbackInfo& info) {
  addon_data(info.Env()).error_class = Napi::Persistent(require_function(info, 0, "errorClass"));
  return info.Env().Undefined();
}

Napi::Value build_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
#ifdef ENGINE_HAVE_CBLAS
  o.Set("blas", "openblas");
#else
  o.Set("blas", "builtin");
#endif
  o.Set("backends", Napi::Array::New(env, 0));
  Napi::Array backends = o.Get("backends").As<Napi::Array>();
  backends.Set(0u, "cpu");
  if (engine::cuda_backend_built()) backends.Set(1u, "cuda");
  // Why CUDA is (not) usable here: the launcher's --device cuda / auto decide with these.
  o.Set("cuda", engine::cuda_backend_status());
  o.Set("cudaDevices", engine::cuda_device_count());
  o.Set("napiVersion", NAPI_VERSION);
  return o;
}

}  // namespace
}  // namespace addon

static Napi::Object init_addon(Napi::Env env, Napi::Object exports) {
  using namespace addon;
  auto* data = new AddonData();
  env.SetInstanceData(data);
  data->executor_class = Napi::Persistent(AddonExecutor::define(env));
  data->links_class = Napi::Persistent(AddonLinks::define(env));
  exports.Set("setErrorClass", Napi::Function::New(env, set_error_class, "setErrorClass"));
  exports.Set("buildInfo", Napi::Function::New(env, build_info, "buildInfo"));
  exports.Set("loadExecutor", Napi::Function::New(env, load_executor, "loadExecutor"));
  exports.Set("readModelConfig", Napi::Function::New(env, read_model_config, "readModelConfig"));
  exports.Set("checkParallelLayout", Napi::Function::New(env, check_parallel_layout, "checkParallelLayout"));
  exports.Set("commInit", Napi::Function::New(env, comm_init, "commInit"));
  exports.Set("runFollower", Napi::Function::New(env, run_follower, "runFollower"));
  exports.Set("spawnGroups", Napi::Function::New(env, spawn_groups, "spawnGroups"));
  exports.Set("linkToParent", Napi::Function::New(env, link_to_parent, "linkToParent"));
  exports.Set("joinGroup", Napi::Function::New(env, join_group, "joinGroup"));
  exports.Set("linkGroups", Napi::Function::New(env, link_groups, "linkGroups"));
  exports.Set("commFinalize", Napi::Function::New(env, comm_finalize, "commFinalize"));
  exports.Set("groupMembers", Napi::Function::New(env, group_members, "groupMembers"));
  exports.Set("watchLiveness", Napi::Function::New(env, watch_liveness, "watchLiveness"));
  exports.Set("livenessStalled", Napi::Function::New(env, liveness_stalled, "livenessStalled"));
  exports.Set("setParentDeathSignal", Napi::Function::New(env, set_parent_death_signal, "setParentDeathSignal"));
  return exports;
}

NODE_API_MODULE(trtllm_native, init_addon)
