#include "addon-process.h"

#include <cerrno>
#include <cstring>
#include <string>

#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "addon-args.h"
#include "addon-errors.h"

namespace addon {

Napi::Value set_parent_death_signal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int64_t signal = require_integer(info, 0, "signal");
  if (signal < 1 || signal > 64) {
    throw make_error(env, "invalid_argument", "argument 'signal' must be a signal number in 1..64, got " + std::to_string(signal));
  }
#ifdef __linux__
  if (prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(signal)) != 0) {
    throw make_error(env, "internal", std::string("prctl(PR_SET_PDEATHSIG) failed: ") + std::strerror(errno));
  }
  // Read after the setting: a parent that died before it was set has already handed this process to a reaper.
  return Napi::Number::New(env, static_cast<double>(getppid()));
#else
  throw make_error(env, "unsupported", "setParentDeathSignal: PR_SET_PDEATHSIG is Linux-only");
#endif
}

}  // namespace addon
