// Who stopped a stuck gang (pure, no MPI): the leader's verdict once one of its waits reached the hang timeout, and
// the sentence that says it. A follower that did not answer the leader's question made no progress: stopped
// (SIGSTOP, a debugger), or stuck outside any wait (a kernel that never returns). When every follower answered, each
// is waiting for somebody else — a protocol bug rather than a dead rank — and the verdict names no rank but says
// what each one waits for.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/liveness.h"

namespace engine {

struct HangVerdict {
  std::vector<int32_t> culprits;  // ranks, ascending
  std::string reason;             // one line: "rank 1 on vm made no progress for 30.0 s in iteration 1234 (forward: all-reduce)"
};

// `self`: the reporting rank's stuck wait (its seconds are how long it waited); `others`: every other rank of the
// gang, answered or not.
HangVerdict judge_hang(const RankActivity& self, const std::vector<RankActivity>& others);

// "forward: all-reduce", "idle: the next plan", "forward" (computing).
std::string describe_activity(const RankActivity& activity);

// The sentence of a verdict with these culprits, from `self`'s point of view (also what a follower says of its leader).
std::string describe_hang(const RankActivity& self, const std::vector<RankActivity>& culprits,
                          const std::vector<RankActivity>& waiting);

}  // namespace engine
