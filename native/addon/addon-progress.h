// Load progress crosses threads the same way for the leader's executor and a follower: (bytes done, bytes total)
// handed to a ThreadSafeFunction and called on the JS thread.
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace addon {

using Progress = std::pair<uint64_t, uint64_t>;

// ThreadSafeFunction callback: calls onProgress(done, total); owns and frees `progress`.
inline void deliver_progress(Napi::Env env, Napi::Function callback, Progress* progress) {
  std::unique_ptr<Progress> owned(progress);
  if (env == nullptr || callback.IsEmpty()) return;
  callback.Call({Napi::Number::New(env, static_cast<double>(owned->first)),
                 Napi::Number::New(env, static_cast<double>(owned->second))});
}

}  // namespace addon
