// Native failures become real JS errors of the class the JS side registered (worker/common/errors.ts), with a
// stable `code`, so callers switch on codes rather than parse messages.
#pragma once
#include <napi.h>

#include <string>

#include "errors.h"

namespace addon {

struct AddonData {
  Napi::FunctionReference error_class;     // new ErrorClass(message, code)
  Napi::FunctionReference executor_class;  // AddonExecutor's constructor
  Napi::FunctionReference links_class;     // AddonLinks's constructor
};

AddonData& addon_data(Napi::Env env);
Napi::Error make_error(Napi::Env env, const std::string& code, const std::string& message);
Napi::Error from_engine_error(Napi::Env env, const engine::EngineError& error);

}  // namespace addon
