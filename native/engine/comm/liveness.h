// The liveness watch of a leader-mode gang: no rank may wait for another one forever unnoticed. Open MPI's blocking
// calls never time out, so a stopped or hung rank used to freeze every other rank inside a collective while the
// leader's HTTP port kept saying "ready". Every wait for a peer inside a step (comm-wait.h) now watches the clock:
//  - the leader, once one wait has lasted half the hang timeout, marks the gang stalled (readiness answers 503) and
//    asks every follower what it is doing (over the leader channel, leader-channel.h); at the hang timeout it names
//    the ranks that did not answer and ends the gang (comm_abort) — a wait that completes in between resumes;
//  - a follower whose own wait inside a step lasts twice the hang timeout names the leader: the leader would have
//    acted by then if it were waiting too, so it is stopped or stuck outside MPI.
// Waiting for the leader's next plan is never a hang (the leader may be idle for hours); followers answer the
// leader's questions from there too. Everything here runs on the thread that makes the rank's MPI calls, except
// liveness_stalled(), which any thread may read.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace engine {

struct LivenessSettings {
  std::chrono::milliseconds hang_timeout{0};  // 0: no deadline (followers still answer the leader)
};

// One rank as the watch saw it.
struct RankActivity {
  int32_t rank = 0;
  std::string host;
  bool answered = true;     // false: it did not answer the leader's question (stopped, or stuck outside a wait)
  int64_t iteration = 0;    // forward passes begun (the number of the plan the gang is on)
  std::string step;         // "forward", "allocate_kv", "copy_kv_block", "idle"
  std::string waiting_for;  // "all-reduce", "recv from rank 2", "the next plan"; "" while computing
  double seconds = 0;       // in that wait
};

enum class LivenessEventKind {
  stalled,  // leader: one wait has lasted half the hang timeout; the followers are being asked
  resumed,  // leader: that wait completed after all
  hang,     // the gang ends right after this event (comm_abort)
};

struct LivenessEvent {
  LivenessEventKind kind = LivenessEventKind::stalled;
  RankActivity self;         // the reporting rank and its wait
  int64_t hang_timeout_ms = 0;
  std::vector<int32_t> culprits;     // hang: the ranks that made no progress (empty: every rank answered, waiting)
  std::vector<RankActivity> others;  // hang: every other rank as it answered (or did not)
};

// Where the events go (the addon sets it; called on the comm thread). After a hang event returns the gang ends at
// once, so a sink that writes a line must write it synchronously. Without a sink, events are written to stderr.
using LivenessSink = std::function<void(const LivenessEvent&)>;
void liveness_set_sink(LivenessSink sink);

// What this rank does from now on, for the reports: the leader calls it before each plan it sends, a follower for
// each plan it receives. `step` must be a string literal (it is kept as a pointer).
void liveness_begin_step(int64_t iteration, const char* step);

// True on the leader from half the hang timeout of one wait until that wait completes: the gang cannot answer.
bool liveness_stalled();

// Test hook: what ends the gang after a hang event (default: comm_abort with `reason`). A native test records the
// verdict and lets the wait go on instead.
void liveness_set_hang_action(std::function<void(const std::string& reason)> action);

}  // namespace engine
