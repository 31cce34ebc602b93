#include "comm/idle-pause.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace engine {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSpin = std::chrono::milliseconds(1);       // a busy leader's next plan comes well within this
constexpr auto kLinkedSleep = std::chrono::milliseconds(50);  // woken earlier by the leader; the bound is a safety net
constexpr auto kFirstTimed = std::chrono::microseconds(50);
constexpr auto kMaxTimed = std::chrono::microseconds(1000);

}  // namespace

IdleWait idle_wait_from_env() {
  const char* v = std::getenv("TRTLLM_IDLE_WAIT");
  if (v != nullptr && std::strcmp(v, "timed") == 0) return IdleWait::timed;
  if (v != nullptr && std::strcmp(v, "spin") == 0) return IdleWait::spin;
  return IdleWait::sleep;
}

IdlePause::IdlePause(IdleWait mode, WakeSleeper& sleeper)
    : mode_(mode), sleeper_(sleeper), spin_until_(Clock::now() + kSpin) {}

void IdlePause::pause() {
  if (mode_ == IdleWait::spin || Clock::now() < spin_until_) return;
  if (mode_ == IdleWait::sleep && sleeper_.linked()) {
    // Say it first and look once more: a plan sent before the leader could see the announcement is found by that
    // look, one sent after it comes with a wake.
    if (!announced_) {
      sleeper_.announce();
      announced_ = true;
      return;
    }
    if (sleeper_.sleep(kLinkedSleep)) {
      announced_ = false;  // the leader read the announcement: the next sleep needs a new one
      spin_until_ = Clock::now() + kSpin;
    }
    return;
  }
  timed_ = timed_.count() == 0 ? kFirstTimed : std::min(kMaxTimed, timed_ * 2);
  std::this_thread::sleep_for(timed_);
}

}  // namespace engine
