#include "addon-links.h"

#include <chrono>
#include <string>
#include <tuple>

#include "addon-args.h"
#include "addon-errors.h"
#include "addon-parallel.h"
#include "comm/comm.h"
#include "errors.h"

namespace addon {
namespace {

using Message = std::tuple<uint32_t, int32_t, std::vector<uint8_t>>;  // link index, tag, bytes

void deliver(Napi::Env env, Napi::Function callback, std::vector<Message>* batch) {
  std::unique_ptr<std::vector<Message>> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;
  Napi::Array array = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); ++i) {
    auto& [index, tag, bytes] = (*owned)[i];
    Napi::Array m = Napi::Array::New(env, 3);
    m.Set(0u, index);
    m.Set(1u, tag);
    m.Set(2u, Napi::Buffer<uint8_t>::Copy(env, bytes.data(), bytes.size()));
    array.Set(static_cast<uint32_t>(i), m);
  }
  callback.Call({array});
}

Napi::Object new_links(Napi::Env env, std::vector<engine::Link> links) {
  Napi::Object handle = addon_data(env).links_class.New({});
  AddonLinks::Unwrap(handle)->attach(std::move(links));
  return handle;
}

// Spawning blocks until the new ranks are up (seconds: each is a Node process loading the addon), so it runs off
// the main thread.
class SpawnWorker : public Napi::AsyncWorker {
 public:
  SpawnWorker(Napi::Env env, std::vector<engine::SpawnSpec> specs)
      : Napi::AsyncWorker(env, "trtllm.spawnGroups"), deferred_(Napi::Promise::Deferred::New(env)), specs_(std::move(specs)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      for (const auto& spec : specs_) links_.push_back(engine::link_spawn(spec));
    } catch (const engine::EngineError& e) {
      code_ = engine::error_code_name(e.code());
      SetError("group " + std::to_string(links_.size()) + ": " + e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(new_links(Env(), std::move(links_))); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(make_error(Env(), code_, error.Message()).Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<engine::SpawnSpec> specs_;
  std::vector<engine::Link> links_;
  std::string code_ = "internal";
};

class LinkGroupsWorker : public Napi::AsyncWorker {
 public:
  LinkGroupsWorker(Napi::Env env, int32_t color, int32_t groups)
      : Napi::AsyncWorker(env, "trtllm.linkGroups"), deferred_(Napi::Promise::Deferred::New(env)), color_(color), groups_(groups) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      links_ = engine::link_groups(color_, groups_);
    } catch (const engine::EngineError& e) {
      code_ = engine::error_code_name(e.code());
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(new_links(Env(), std::move(links_))); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(make_error(Env(), code_, error.Message()).Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  int32_t color_, groups_;
  std::vector<engine::Link> links_;
  std::string code_ = "internal";
};

}  // namespace

Napi::Function AddonLinks::define(Napi::Env env) {
  return DefineClass(env, "AddonLinks",
                     {InstanceMethod<&AddonLinks::count>("count"), InstanceMethod<&AddonLinks::connected>("connected"),
                      InstanceMethod<&AddonLinks::listen>("listen"), InstanceMethod<&AddonLinks::send>("send"),
                      InstanceMethod<&AddonLinks::pending>("pending"),
                      InstanceMethod<&AddonLinks::disconnect>("disconnect"), InstanceMethod<&AddonLinks::close>("close")});
}

AddonLinks::AddonLinks(const Napi::CallbackInfo& info) : Napi::ObjectWrap<AddonLinks>(info), env_(info.Env()) {
  napi_add_env_cleanup_hook(env_, reinterpret_cast<void (*)(void*)>(&AddonLinks::cleanup_hook), this);
}

AddonLinks::~AddonLinks() {
  napi_remove_env_cleanup_hook(env_, reinterpret_cast<void (*)(void*)>(&AddonLinks::cleanup_hook), this);
  stop();
}

void AddonLinks::cleanup_hook(AddonLinks* self) { self->stop(); }

void AddonLinks::attach(std::vector<engine::Link> links) {
  links_ = std::move(links);
  dropped_.assign(links_.size(), false);
}

engine::Link& AddonLinks::link(Napi::Env env, const Napi::Value& index) {
  if (!index.IsNumber()) throw make_error(env, "invalid_argument", "link index must be a number");
  const int64_t i = index.As<Napi::Number>().Int64Value();
  if (i < 0 || i >= static_cast<int64_t>(links_.size())) {
    throw make_error(env, "invalid_argument", "link index " + std::to_string(i) + " is out of range (0.." +
                                                  std::to_string(links_.size()) + ")");
  }
  return links_[static_cast<size_t>(i)];
}

Napi::Value AddonLinks::count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(links_.size()));
}

Napi::Value AddonLinks::connected(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), link(info.Env(), info[0]).connected());
}

Napi::Value AddonLinks::listen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Function callback = require_function(info, 0, "onMessages");
  if (poller_.joinable()) throw make_error(env, "invalid_argument", "listen() was already called on these links");
  on_messages_ = Napi::ThreadSafeFunction::New(env, callback, "trtllm.links", 0, 1);
  poller_ = std::thread([this] { poll_loop(); });
  return env.Undefined();
}

// Polls every link; a message is in JS within ~20 us while traffic flows, ~200 us after a quiet spell.
void AddonLinks::poll_loop() {
  using clock = std::chrono::steady_clock;
  auto now_ns = [] { return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count(); };
  while (!stopping_.load()) {
    auto* batch = new std::vector<Message>();
    {
      std::lock_guard<std::mutex> lock(drop_mu_);
      for (size_t i = 0; i < links_.size(); ++i) {
        if (dropped_[i]) continue;
        int32_t tag = 0;
        std::vector<uint8_t> bytes;
        while (links_[i].poll(tag, bytes)) batch->emplace_back(static_cast<uint32_t>(i), tag, std::move(bytes));
      }
    }
    if (!batch->empty()) {
      last_activity_ns_.store(now_ns());
      if (on_messages_.NonBlockingCall(batch, deliver) != napi_ok) delete batch;
      continue;
    }
    delete batch;
    // A send or a receipt in the last 50 ms means an answer is likely soon: poll tightly.
    const bool busy = now_ns() - last_activity_ns_.load() < 50'000'000;
    std::unique_lock<std::mutex> lock(wake_mu_);
    wake_.wait_for(lock, std::chrono::microseconds(busy ? 20 : 200), [this] { return stopping_.load(); });
  }
}

Napi::Value AddonLinks::send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  engine::Link& l = link(env, info[0]);
  const int32_t tag = static_cast<int32_t>(require_arg(info, 1, napi_number, "tag").As<Napi::Number>().Int32Value());
  if (info.Length() < 3 || !info[2].IsTypedArray()) throw make_error(env, "invalid_argument", "argument 'bytes' must be a Uint8Array");
  Napi::Uint8Array a = info[2].As<Napi::Uint8Array>();
  try {
    l.post(tag, std::vector<uint8_t>(a.Data(), a.Data() + a.ByteLength()));
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
  last_activity_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count());
  wake_.notify_all();
  return env.Undefined();
}

Napi::Value AddonLinks::pending(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(link(info.Env(), info[0]).pending()));
}

Napi::Value AddonLinks::disconnect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  engine::Link& l = link(env, info[0]);
  const size_t i = static_cast<size_t>(info[0].As<Napi::Number>().Int64Value());
  std::lock_guard<std::mutex> lock(drop_mu_);
  dropped_[i] = true;
  const bool drop_only = info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
  if (!drop_only) l.disconnect();
  return env.Undefined();
}

void AddonLinks::stop() {
  if (!poller_.joinable()) return;
  stopping_.store(true);
  wake_.notify_all();
  poller_.join();
  on_messages_.Release();
}

Napi::Value AddonLinks::close(const Napi::CallbackInfo& info) {
  stop();
  return info.Env().Undefined();
}

Napi::Value spawn_groups(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Value arg = require_arg(info, 0, napi_object, "specs");
  if (!arg.IsArray()) throw make_error(env, "invalid_argument", "argument 'specs' must be an array");
  Napi::Array array = arg.As<Napi::Array>();
  std::vector<engine::SpawnSpec> specs;
  for (uint32_t i = 0; i < array.Length(); ++i) {
    if (!array.Get(i).IsObject()) throw make_error(env, "invalid_argument", "specs[" + std::to_string(i) + "] must be an object");
    const std::string prefix = "specs[" + std::to_string(i) + "].";
    Fields f(env, array.Get(i).As<Napi::Object>(), prefix);
    engine::SpawnSpec spec;
    spec.command = f.string("command", "");
    spec.processes = static_cast<int32_t>(f.integer("processes", 1));
    spec.host = f.string("host", "");
    Napi::Value args = array.Get(i).As<Napi::Object>().Get("args");
    if (args.IsArray()) {
      Napi::Array a = args.As<Napi::Array>();
      for (uint32_t j = 0; j < a.Length(); ++j) {
        if (!a.Get(j).IsString()) throw make_error(env, "invalid_argument", prefix + "args must be strings");
        spec.args.push_back(a.Get(j).As<Napi::String>().Utf8Value());
      }
    }
    if (spec.command.empty()) throw make_error(env, "invalid_argument", prefix + "command is missing");
    specs.push_back(std::move(spec));
  }
  auto* worker = new SpawnWorker(env, std::move(specs));
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Value link_to_parent(const Napi::CallbackInfo& info) {
  std::vector<engine::Link> links;
  links.push_back(engine::link_to_parent());
  return new_links(info.Env(), std::move(links));
}

Napi::Value join_group(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int32_t color = require_arg(info, 0, napi_number, "color").As<Napi::Number>().Int32Value();
  try {
    engine::comm_join_group(color);
    return comm_info_object(env, engine::comm_info());
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
}

Napi::Value group_members(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<engine::RankIdentity> members = engine::comm_world_members();
  Napi::Array out = Napi::Array::New(env, members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("host", members[i].host);
    o.Set("pid", static_cast<double>(members[i].pid));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

Napi::Value link_groups(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int32_t color = require_arg(info, 0, napi_number, "color").As<Napi::Number>().Int32Value();
  const int32_t groups = require_arg(info, 1, napi_number, "numGroups").As<Napi::Number>().Int32Value();
  auto* worker = new LinkGroupsWorker(env, color, groups);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

}  // namespace addon
