// The liveness watch inside the comm unit (liveness.h says what it does): the record of one wait while it lasts, and
// the leader channel it talks over. Used by comm-wait.cpp (waits inside a step) and leader-channel.cpp (the wait
// for the next plan); liveness.cpp and liveness-questions.cpp implement it.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm-mpi.h"
#include "comm/liveness.h"

namespace engine {

class WakeListener;

// What a rank waits for: `op` ("all-reduce", "recv from", "plan send", "the next plan") on `comm`, with `peer` its
// rank in `comm` for a send or receive (-1: a collective, or every follower).
struct WaitSite {
  const char* op;
  MPI_Comm comm = MPI_COMM_NULL;
  int32_t peer = -1;
};

// Message tags on the leader channel's communicator.
constexpr int kTagPlan = 1;    // leader -> follower: an iteration plan
constexpr int kTagQuery = 2;   // leader -> follower: "what are you doing?" (an int64 question number)
constexpr int kTagAnswer = 3;  // follower -> leader: its activity (liveness-state.h's AnswerWire)

// The leader channel as the watch uses it; attached by leader-channel.cpp while the rank serves.
struct WatchedChannel {
  MPI_Comm comm = MPI_COMM_NULL;   // a duplicate of the world: its ranks are world ranks
  int32_t rank = 0, size = 1;
  std::vector<std::string> hosts;  // by rank
  WakeListener* wake = nullptr;    // leader: wakes sleeping followers after a question
  LivenessSettings settings;
};
void liveness_attach(const WatchedChannel* channel);  // nullptr: detach (the channel closes)

// A follower answers the leader's question `message`, already matched by a probe for kTagQuery from rank 0.
void liveness_answer(MPI_Message& message);

enum class WaitKind {
  in_step,    // a peer is expected within the step's own time: deadlines apply
  next_plan,  // a follower waits for the leader, which may be idle: no deadline
};

// One wait, from its first unsuccessful test to its completion: while it lives the watch reports it, and tick()
// answers the leader and acts on the deadlines.
class LivenessWait {
 public:
  LivenessWait(const WaitSite& site, WaitKind kind);
  ~LivenessWait();
  LivenessWait(const LivenessWait&) = delete;
  LivenessWait& operator=(const LivenessWait&) = delete;
  // Called on every turn of the wait loop; looks at the clock every few turns and does its work once a millisecond.
  void tick();

 private:
  WaitKind kind_;
  uint32_t turns_ = 0;
  std::chrono::steady_clock::time_point since_, last_, asked_at_;
  bool asked_ = false;     // leader: the followers were asked (the gang is stalled)
  bool reported_ = false;  // a hang was reported for this wait
};

}  // namespace engine
