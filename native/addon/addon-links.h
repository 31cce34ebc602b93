// Orchestrator mode in the addon: the links between the orchestrator and its worker groups
// (engine/comm/comm-link.h) as one JS object, with a poller thread that hands arrived messages to JS in batches.
#pragma once
#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/comm-link.h"

namespace addon {

class AddonLinks : public Napi::ObjectWrap<AddonLinks> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit AddonLinks(const Napi::CallbackInfo& info);
  ~AddonLinks() override;

  void attach(std::vector<engine::Link> links);

 private:
  Napi::Value count(const Napi::CallbackInfo& info);
  Napi::Value connected(const Napi::CallbackInfo& info);
  Napi::Value listen(const Napi::CallbackInfo& info);
  Napi::Value send(const Napi::CallbackInfo& info);
  Napi::Value pending(const Napi::CallbackInfo& info);
  Napi::Value disconnect(const Napi::CallbackInfo& info);
  Napi::Value close(const Napi::CallbackInfo& info);

  engine::Link& link(Napi::Env env, const Napi::Value& index);
  void poll_loop();
  void stop();
  static void cleanup_hook(AddonLinks* self);

  std::vector<engine::Link> links_;
  std::vector<bool> dropped_;      // disconnected or closed from JS: no longer polled
  std::mutex drop_mu_;
  Napi::ThreadSafeFunction on_messages_;
  std::thread poller_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> last_activity_ns_{0};  // last send or receipt (steady clock)
  std::mutex wake_mu_;
  std::condition_variable wake_;
  Napi::Env env_;
};

// commInit is in addon-parallel; these start orchestrator mode:
// spawnGroups([{command, args, processes, host?}]) -> Promise<AddonLinks> (one link per group, in order)
Napi::Value spawn_groups(const Napi::CallbackInfo& info);
// linkToParent() -> AddonLinks with one link (unconnected when this process was not spawned)
Napi::Value link_to_parent(const Napi::CallbackInfo& info);
// joinGroup(color) -> CommInfo of the group (collective over the job; no-spawn variant)
Napi::Value join_group(const Napi::CallbackInfo& info);
// groupMembers() -> [{host, pid}] of every rank of this process's group, in rank order (collective over the group)
Napi::Value group_members(const Napi::CallbackInfo& info);
// linkGroups(color, numGroups) -> Promise<AddonLinks> (collective over the job; after joinGroup)
Napi::Value link_groups(const Napi::CallbackInfo& info);

}  // namespace addon
