#include "comm/liveness.h"

#include <cstdio>

#include "comm/comm.h"
#include "comm/liveness-state.h"
#include "comm/liveness-verdict.h"

namespace engine {
namespace {

using Clock = LivenessClock;
constexpr int kHangExitCode = 6;
// How often a wait does the watch's work (answering, deadlines): often enough that an answer is never the slow part.
constexpr auto kWorkEvery = std::chrono::milliseconds(1);

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A peer's rank in `comm` as a world rank (the channel's communicator is a duplicate of the world).
int32_t world_rank(MPI_Comm comm, int32_t peer, MPI_Comm world) {
  MPI_Group from = MPI_GROUP_NULL, to = MPI_GROUP_NULL;
  int out = peer;
  if (MPI_Comm_group(comm, &from) == MPI_SUCCESS && MPI_Comm_group(world, &to) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(from, 1, &peer, to, &out);
  }
  if (from != MPI_GROUP_NULL) MPI_Group_free(&from);
  if (to != MPI_GROUP_NULL) MPI_Group_free(&to);
  return out;
}

std::string event_text(const LivenessEvent& e) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", e.self.seconds);
  const std::string where = "iteration " + std::to_string(e.self.iteration) + " (" + describe_activity(e.self) + ")";
  switch (e.kind) {
    case LivenessEventKind::stalled: return "no progress for " + std::string(seconds) + " s in " + where + "; asking the other ranks";
    case LivenessEventKind::resumed: return "progress again after " + std::string(seconds) + " s in " + where;
    case LivenessEventKind::hang: break;
  }
  std::vector<RankActivity> culprits, waiting;
  for (const RankActivity& o : e.others) (o.answered ? waiting : culprits).push_back(o);
  return describe_hang(e.self, culprits, waiting);
}

void emit(Watch& w, const LivenessEvent& event) {
  LivenessSink sink;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    sink = w.sink;
  }
  if (!sink) {
    std::fprintf(stderr, "[rank %d@%s] liveness: %s\n", event.self.rank, event.self.host.c_str(), event_text(event).c_str());
    std::fflush(stderr);
    return;
  }
  try {
    sink(event);
  } catch (...) {
    // A sink that fails must not keep the gang from ending (hang) or the wait from going on.
  }
}

void end_gang(Watch& w, const std::string& reason) {
  std::function<void(const std::string&)> action;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    action = w.hang_action;
  }
  if (action) {
    action(reason);
    return;
  }
  comm_abort(kHangExitCode, "hang: " + reason);
}

LivenessEvent make_event(LivenessEventKind kind, const RankActivity& self, const WatchedChannel& ch) {
  LivenessEvent e;
  e.kind = kind;
  e.self = self;
  e.hang_timeout_ms = ch.settings.hang_timeout.count();
  return e;
}

// Leader, at the hang timeout: the ranks that did not answer made no progress.
void report_verdict(Watch& w, Clock::time_point now) {
  const WatchedChannel& ch = *w.channel;
  LivenessEvent e = make_event(LivenessEventKind::hang, current_activity(w, now), ch);
  for (int32_t r = 1; r < ch.size; ++r) e.others.push_back(answered_activity(w, r));
  const HangVerdict verdict = judge_hang(e.self, e.others);
  e.culprits = verdict.culprits;
  emit(w, e);
  end_gang(w, verdict.reason);
}

// Follower, at twice the hang timeout: the leader, which acts at the hang timeout when it waits too, did not.
void report_leader(Watch& w, Clock::time_point now) {
  const WatchedChannel& ch = *w.channel;
  LivenessEvent e = make_event(LivenessEventKind::hang, current_activity(w, now), ch);
  RankActivity leader;
  leader.rank = 0;
  leader.host = ch.hosts[0];
  leader.answered = false;
  e.others.push_back(leader);
  e.culprits.push_back(0);
  emit(w, e);
  end_gang(w, describe_hang(e.self, {leader}, {}));
}

}  // namespace

Watch& watch() {
  static Watch* w = new Watch();  // never destroyed: a rank may report until its very end
  return *w;
}

RankActivity current_activity(const Watch& w, LivenessClock::time_point now) {
  const WatchedChannel& ch = *w.channel;
  RankActivity a;
  a.rank = ch.rank;
  a.host = ch.hosts[static_cast<size_t>(ch.rank)];
  a.iteration = w.iteration;
  a.step = w.step;
  if (w.site != nullptr) {
    a.waiting_for = w.site->op;
    if (w.site->peer >= 0) a.waiting_for += " rank " + std::to_string(world_rank(w.site->comm, w.site->peer, ch.comm));
    a.seconds = seconds_between(w.since, now);
  }
  return a;
}

void liveness_set_sink(LivenessSink sink) {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.sink = std::move(sink);
}

void liveness_set_hang_action(std::function<void(const std::string& reason)> action) {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.hang_action = std::move(action);
}

void liveness_begin_step(int64_t iteration, const char* step) {
  Watch& w = watch();
  w.iteration = iteration;
  w.step = step;
}

bool liveness_stalled() { return watch().stalled.load(std::memory_order_relaxed); }

void liveness_attach(const WatchedChannel* channel) {
  Watch& w = watch();
  w.channel = channel;
  w.answers.clear();
  w.answered.clear();
  w.stalled = false;
  // Sends still pending stay in the list (their buffers with them): the communicator is freed only once they end.
}

LivenessWait::LivenessWait(const WaitSite& site, WaitKind kind) : kind_(kind), since_(Clock::now()), last_(since_) {
  Watch& w = watch();
  w.site = &site;
  w.since = since_;
}

LivenessWait::~LivenessWait() {
  Watch& w = watch();
  if (asked_ && w.channel != nullptr) {
    w.stalled = false;
    emit(w, make_event(LivenessEventKind::resumed, current_activity(w, Clock::now()), *w.channel));
  }
  w.site = nullptr;
}

void LivenessWait::tick() {
  const auto now = Clock::now();
  if (now - last_ < kWorkEvery) return;
  last_ = now;
  Watch& w = watch();
  if (w.channel == nullptr) return;
  complete_sends(w);
  const auto timeout = w.channel->settings.hang_timeout;
  const auto waited = now - since_;
  const bool deadlines = kind_ == WaitKind::in_step && timeout.count() > 0 && !reported_;
  if (w.channel->rank != 0) {
    answer_questions(w);
    if (deadlines && waited >= 2 * timeout) {
      reported_ = true;
      report_leader(w, now);
    }
    return;
  }
  if (asked_) collect_answers(w);
  if (!deadlines) return;
  if (!asked_ && waited >= timeout / 2) {
    asked_ = true;
    asked_at_ = now;
    ask_followers(w);
    w.stalled = true;
    emit(w, make_event(LivenessEventKind::stalled, current_activity(w, now), *w.channel));
  }
  // The followers get half the hang timeout to answer, even when this thread itself was held up past both marks.
  if (waited >= timeout && now - asked_at_ >= timeout / 2) {
    reported_ = true;
    collect_answers(w);
    report_verdict(w, now);
  }
}

}  // namespace engine
