// The leader's questions and the followers' answers over the leader channel (liveness.h says when they are asked;
// liveness-state.h declares these functions).
#include <cstdio>

#include "comm/liveness-state.h"
#include "comm/wake-link.h"

namespace engine {
namespace {

void send_answer(Watch& w, int64_t question) {
  PendingSend& p = w.sends.emplace_back();
  const RankActivity a = current_activity(w, LivenessClock::now());
  p.answer.question = question;
  p.answer.iteration = a.iteration;
  p.answer.seconds = a.seconds;
  std::snprintf(p.answer.step, sizeof(p.answer.step), "%s", a.step.c_str());
  std::snprintf(p.answer.waiting_for, sizeof(p.answer.waiting_for), "%s", a.waiting_for.c_str());
  if (MPI_Isend(&p.answer, sizeof(AnswerWire), MPI_BYTE, 0, kTagAnswer, w.channel->comm, &p.request) != MPI_SUCCESS) {
    w.sends.pop_back();
  }
}

}  // namespace

void complete_sends(Watch& w) {
  for (auto it = w.sends.begin(); it != w.sends.end();) {
    int done = 0;
    // A send that failed (its peer is gone) is dropped: mpirun reports a dead rank on its own.
    if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
    it = done ? w.sends.erase(it) : std::next(it);
  }
}

// Follower: every question the leader sent, answered (from a wait inside a step; the wait for the next plan finds
// them with its own probe and calls liveness_answer).
void answer_questions(Watch& w) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(0, kTagQuery, w.channel->comm, &flag, &status) != MPI_SUCCESS || !flag) return;
    int64_t question = 0;
    comm_check(MPI_Recv(&question, sizeof(question), MPI_BYTE, 0, kTagQuery, w.channel->comm, MPI_STATUS_IGNORE),
               "MPI_Recv (liveness question)");
    send_answer(w, question);
  }
}

void ask_followers(Watch& w) {
  const WatchedChannel& ch = *w.channel;
  ++w.question;
  w.answers.assign(static_cast<size_t>(ch.size), AnswerWire{});
  w.answered.assign(static_cast<size_t>(ch.size), false);
  for (int32_t r = 1; r < ch.size; ++r) {
    PendingSend& p = w.sends.emplace_back();
    p.question = w.question;
    if (MPI_Isend(&p.question, sizeof(p.question), MPI_BYTE, r, kTagQuery, ch.comm, &p.request) != MPI_SUCCESS) {
      w.sends.pop_back();
    }
  }
  if (ch.wake != nullptr) ch.wake->wake_sleepers();
}

// Leader: the answers that came, to the last question (older ones are dropped).
void collect_answers(Watch& w) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagAnswer, w.channel->comm, &flag, &status) != MPI_SUCCESS || !flag) return;
    AnswerWire answer;
    comm_check(MPI_Recv(&answer, sizeof(answer), MPI_BYTE, status.MPI_SOURCE, kTagAnswer, w.channel->comm, MPI_STATUS_IGNORE),
               "MPI_Recv (liveness answer)");
    const auto from = static_cast<size_t>(status.MPI_SOURCE);
    if (answer.question == w.question && from < w.answers.size()) {
      w.answers[from] = answer;
      w.answered[from] = true;
    }
  }
}

RankActivity answered_activity(const Watch& w, int32_t rank) {
  const auto i = static_cast<size_t>(rank);
  RankActivity o;
  o.rank = rank;
  o.host = w.channel->hosts[i];
  o.answered = i < w.answered.size() && w.answered[i];
  if (o.answered) {
    o.iteration = w.answers[i].iteration;
    o.step = w.answers[i].step;
    o.waiting_for = w.answers[i].waiting_for;
    o.seconds = w.answers[i].seconds;
  }
  return o;
}

void liveness_answer(MPI_Message& message) {
  Watch& w = watch();
  int64_t question = 0;
  comm_check(MPI_Mrecv(&question, sizeof(question), MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv (liveness question)");
  if (w.channel != nullptr) send_answer(w, question);
}

}  // namespace engine
