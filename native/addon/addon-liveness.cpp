#include "addon-liveness.h"

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "addon-args.h"
#include "addon-errors.h"

namespace addon {
namespace {

// Long enough for a JS thread that is busy with a request; short enough that a wedged one does not keep a hung gang
// alive (comm_abort then writes the reason itself).
constexpr auto kHangDeliveryBound = std::chrono::seconds(5);

struct EventCall {
  engine::LivenessEvent event;
  std::promise<void> delivered;
};

const char* kind_name(engine::LivenessEventKind kind) {
  switch (kind) {
    case engine::LivenessEventKind::stalled: return "stalled";
    case engine::LivenessEventKind::resumed: return "resumed";
    case engine::LivenessEventKind::hang: return "hang";
  }
  return "?";
}

Napi::Object activity_object(Napi::Env env, const engine::RankActivity& a) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", a.rank);
  o.Set("host", a.host);
  o.Set("answered", a.answered);
  o.Set("iteration", Napi::Number::New(env, static_cast<double>(a.iteration)));
  o.Set("step", a.step);
  o.Set("waitingFor", a.waiting_for);
  o.Set("seconds", a.seconds);
  return o;
}

Napi::Object event_object(Napi::Env env, const engine::LivenessEvent& e) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("kind", kind_name(e.kind));
  o.Set("self", activity_object(env, e.self));
  o.Set("hangTimeoutMs", Napi::Number::New(env, static_cast<double>(e.hang_timeout_ms)));
  Napi::Array culprits = Napi::Array::New(env, e.culprits.size());
  for (size_t i = 0; i < e.culprits.size(); ++i) culprits.Set(static_cast<uint32_t>(i), e.culprits[i]);
  o.Set("culprits", culprits);
  Napi::Array others = Napi::Array::New(env, e.others.size());
  for (size_t i = 0; i < e.others.size(); ++i) others.Set(static_cast<uint32_t>(i), activity_object(env, e.others[i]));
  o.Set("others", others);
  return o;
}

// On the JS thread: onEvent(event); the comm thread learns that it returned.
void deliver_event(Napi::Env env, Napi::Function callback, EventCall* call) {
  std::unique_ptr<EventCall> owned(call);
  if (env != nullptr && !callback.IsEmpty()) {
    try {
      callback.Call({event_object(env, owned->event)});
    } catch (const Napi::Error&) {
      // The handler's failure is its own; the gang still ends (hang) or goes on.
    }
  }
  owned->delivered.set_value();
}

std::mutex g_mu;
Napi::ThreadSafeFunction g_events;  // the current onEvent; released when replaced
bool g_watching = false;

}  // namespace

engine::LivenessSettings to_liveness_settings(Napi::Env env, Napi::Object load_options) {
  const int64_t ms = Fields(env, load_options, "").integer("hangTimeoutMs", 0);
  if (ms < 0) {
    throw make_error(env, "invalid_argument", "field 'hangTimeoutMs' must be an integer >= 0 (0: no deadline), got " +
                                                  std::to_string(ms));
  }
  engine::LivenessSettings s;
  s.hang_timeout = std::chrono::milliseconds(ms);
  return s;
}

Napi::Value watch_liveness(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Function on_event = require_function(info, 0, "onEvent");
  Napi::ThreadSafeFunction tsfn = Napi::ThreadSafeFunction::New(env, on_event, "trtllm.liveness", 0, 1);
  tsfn.Unref(env);  // a watch never keeps the process alive
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_watching) g_events.Release();
    g_events = tsfn;
    g_watching = true;
  }
  engine::liveness_set_sink([tsfn](const engine::LivenessEvent& event) mutable {
    auto* call = new EventCall{event, {}};
    std::future<void> delivered = call->delivered.get_future();
    if (tsfn.NonBlockingCall(call, deliver_event) != napi_ok) {
      delete call;  // the environment is going away: nobody to tell
      return;
    }
    if (event.kind == engine::LivenessEventKind::hang) delivered.wait_for(kHangDeliveryBound);
  });
  return env.Undefined();
}

Napi::Value liveness_stalled(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), engine::liveness_stalled());
}

}  // namespace addon
