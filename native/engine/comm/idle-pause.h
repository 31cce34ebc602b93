// How a follower passes the time between two looks for the leader's next plan (no MPI here). A busy leader sends
// its next plan within microseconds, so the follower spins first; after a millisecond without one the leader is
// idle, and the follower sleeps: on the wake link when it has one (woken the moment the leader sends; wake-link.h),
// else for growing intervals up to 1 ms (what that costs the first request after idle: up to one interval).
// TRTLLM_IDLE_WAIT picks the way for measurements (bench/idle-followers.ts): `sleep` (the default), `timed` (no wake
// link), `spin` (never sleep: what Open MPI's blocking receive does).
#pragma once
#include <chrono>

#include "comm/wake-link.h"

namespace engine {

enum class IdleWait { sleep, timed, spin };

// From TRTLLM_IDLE_WAIT (unset or unknown: sleep).
IdleWait idle_wait_from_env();

class IdlePause {
 public:
  IdlePause(IdleWait mode, WakeSleeper& sleeper);
  // Between two unsuccessful looks for a message: returns after a spin, a sleep, or a wake.
  void pause();

 private:
  IdleWait mode_;
  WakeSleeper& sleeper_;
  std::chrono::steady_clock::time_point spin_until_;
  bool announced_ = false;           // the leader was told this follower sleeps
  std::chrono::microseconds timed_{0};  // the last timed sleep
};

}  // namespace engine
