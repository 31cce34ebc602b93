// The liveness watch's state (comm unit only), shared by liveness.cpp (the waits' deadlines and the events) and
// liveness-questions.cpp (the leader's questions, the followers' answers). One per process; the comm thread's own,
// except the sink and the hang action (under mu) and `stalled` (read by any thread).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "comm/liveness-watch.h"

namespace engine {

using LivenessClock = std::chrono::steady_clock;

// A follower's answer on the wire (kTagAnswer): fixed size; every rank runs the same build.
struct AnswerWire {
  int64_t question = 0;
  int64_t iteration = 0;
  double seconds = 0;
  char step[24] = {};
  char waiting_for[48] = {};
};

struct PendingSend {
  MPI_Request request = MPI_REQUEST_NULL;
  int64_t question = 0;  // a question's buffer
  AnswerWire answer;     // an answer's buffer
};

struct Watch {
  std::mutex mu;  // the sink and the hang action: set from other threads
  LivenessSink sink;
  std::function<void(const std::string&)> hang_action;
  std::atomic<bool> stalled{false};
  // The comm thread's own.
  const WatchedChannel* channel = nullptr;
  int64_t iteration = 0;
  const char* step = "idle";
  const WaitSite* site = nullptr;  // the wait in progress; nullptr while computing
  LivenessClock::time_point since;
  int64_t question = 0;              // leader: the last question asked
  std::vector<AnswerWire> answers;   // leader: by rank, to `question`
  std::vector<bool> answered;
  std::list<PendingSend> sends;      // questions and answers MPI still holds (a list: buffers must not move)
};

// The process's watch (never destroyed: a rank may report until its very end).
Watch& watch();

// What this rank is doing now (the wait in progress, if any), as a report says it.
RankActivity current_activity(const Watch& w, LivenessClock::time_point now);

// liveness-questions.cpp: the questions and answers MPI holds are completed or kept; a follower answers every
// question waiting for it; the leader asks every follower (and wakes the sleeping ones) and collects the answers to
// its last question; what a follower answered, as a RankActivity.
void complete_sends(Watch& w);
void answer_questions(Watch& w);
void ask_followers(Watch& w);
void collect_answers(Watch& w);
RankActivity answered_activity(const Watch& w, int32_t rank);

}  // namespace engine
