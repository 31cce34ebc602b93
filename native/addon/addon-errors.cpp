#include "addon-errors.h"

namespace addon {

AddonData& addon_data(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

Napi::Error make_error(Napi::Env env, const std::string& code, const std::string& message) {
  AddonData& data = addon_data(env);
  if (data.error_class.IsEmpty()) {
    Napi::Error error = Napi::Error::New(env, message);
    error.Set("code", Napi::String::New(env, code));
    return error;
  }
  Napi::Object instance = data.error_class.New({Napi::String::New(env, message), Napi::String::New(env, code)});
  return Napi::Error(env, instance);
}

Napi::Error from_engine_error(Napi::Env env, const engine::EngineError& error) {
  return make_error(env, engine::error_code_name(error.code()), error.what());
}

}  // namespace addon
