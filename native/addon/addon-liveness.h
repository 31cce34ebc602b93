// The liveness watch in the addon (engine/comm/liveness.h): the hang timeout a leader or follower loads with, and
// the watch's events delivered to JS, which writes them as status lines (worker/roles/liveness-report.ts).
#pragma once
#include <napi.h>

#include "comm/liveness.h"

namespace addon {

// loadOptions.hangTimeoutMs (absent: 0, no deadline); an integer >= 0, or an error naming the field and value.
engine::LivenessSettings to_liveness_settings(Napi::Env env, Napi::Object load_options);

// watchLiveness(onEvent): every event of this process's watch, on the JS thread. A hang event waits (up to a few
// seconds) for onEvent to return before the gang ends, so a line it writes synchronously gets out.
Napi::Value watch_liveness(const Napi::CallbackInfo& info);
// livenessStalled() -> boolean: the leader's gang cannot answer now (a wait passed half the hang timeout).
Napi::Value liveness_stalled(const Napi::CallbackInfo& info);

}  // namespace addon
