// The liveness watch with real processes (run under `mpirun -np 3`; a plain run skips). A rank that stops itself
// (SIGSTOP, as a debugger or an operator would) is what a hang looks like; the watch's hang action is the test's, so
// the verdict is recorded and the stopped rank continued (SIGCONT) instead of the job aborting. The order of events
// is fixed by the stop itself — the stopped rank moves only once the verdict names it; the hang timeout says when the
// verdict comes, and gives the waiting follower half of it to answer the leader's question (see below).
#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "check.h"
#include "comm/comm.h"
#include "comm/leader-channel.h"
#include "comm/liveness.h"

using namespace engine;

namespace {

std::vector<LivenessEvent> g_events;
std::vector<std::string> g_reasons;
std::vector<RankIdentity> g_members;
// Case 2: the followers, which both name the stopped leader; each continues it only once both have (see below).
const Comm* g_followers = nullptr;

// Records the verdict and continues the rank it names. When both followers name the leader, the first to reach its
// verdict must not continue the leader before the other has reached its own — the other's wait would then end with
// no verdict at all — so they meet first (a barrier of their own, which neither passes while the leader is stopped).
void record_and_continue(const std::string& reason) {
  g_reasons.push_back(reason);
  const LivenessEvent& hang = g_events.back();
  if (g_followers != nullptr) g_followers->barrier();
  for (int32_t culprit : hang.culprits) kill(static_cast<pid_t>(g_members[static_cast<size_t>(culprit)].pid), SIGCONT);
}

const LivenessEvent* last_of(LivenessEventKind kind) {
  for (auto it = g_events.rbegin(); it != g_events.rend(); ++it) {
    if (it->kind == kind) return &*it;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) check::repo_root = argv[1];
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr) {
    return check::skip("needs mpirun -np 3");
  }
  comm_init(true);
  Comm world = comm_world();
  if (world.size() != 3) return check::skip("needs exactly 3 ranks, got %d", world.size());
  const int r = world.rank();
  g_members = comm_world_members();
  liveness_set_sink([](const LivenessEvent& e) { g_events.push_back(e); });
  liveness_set_hang_action(record_and_continue);
  LivenessSettings settings;
  // The one window here is the leader's for answers (half the timeout after it asks): rank 1, waiting for a plan,
  // must get a turn on the CPU within it. 4 s leaves a busy 2-core machine (3 ranks and whatever else runs) room.
  settings.hang_timeout = std::chrono::milliseconds(4000);
  LeaderChannel channel(world, settings);
  if (r == 0) CHECK_MSG(channel.followers_linked() == 2, "both followers share the leader's host: %d linked", channel.followers_linked());

  // 1. Rank 2 stops before an all-reduce with the leader, while rank 1 waits for its next plan: the leader names
  //    rank 2, and rank 1 answered from its wait for the plan.
  Comm pair = world.split(r == 1 ? 1 : 0, r);  // {0, 2} and {1}
  liveness_begin_step(7, "forward");
  if (r == 1) {
    std::vector<uint8_t> plan = channel.receive_plan();
    CHECK(plan == (std::vector<uint8_t>{1, 2, 3}));
  } else {
    if (r == 2) raise(SIGSTOP);
    float x = 1;
    pair.all_reduce_sum(&x, 1);
    CHECK(x == 2);
    if (r == 2) CHECK(channel.receive_plan() == (std::vector<uint8_t>{1, 2, 3}));  // the plan goes to every follower
  }
  if (r == 0) {
    channel.send_plan({1, 2, 3});
    const LivenessEvent* stalled = last_of(LivenessEventKind::stalled);
    const LivenessEvent* hang = last_of(LivenessEventKind::hang);
    const LivenessEvent* resumed = last_of(LivenessEventKind::resumed);
    CHECK(stalled != nullptr && resumed != nullptr && hang != nullptr);
    if (hang != nullptr) {
      CHECK(hang->culprits == std::vector<int32_t>{2});
      CHECK(hang->self.iteration == 7 && hang->self.step == "forward" && hang->self.waiting_for == "all-reduce");
      CHECK(hang->others.size() == 2 && hang->others[0].rank == 1 && hang->others[0].answered);
      CHECK_MSG(hang->others[0].waiting_for == "the next plan", "rank 1 answered '%s'", hang->others[0].waiting_for.c_str());
      CHECK(!hang->others[1].answered);
      CHECK_MSG(g_reasons.size() == 1 && g_reasons[0].find("rank 2 on ") == 0 &&
                    g_reasons[0].find("made no progress for ") != std::string::npos &&
                    g_reasons[0].find(" in iteration 7 (forward: all-reduce)") != std::string::npos,
                "%s", g_reasons.empty() ? "(no reason)" : g_reasons[0].c_str());
    }
    CHECK(!liveness_stalled());
  }
  world.barrier();

  // 2. The leader stops before an all-reduce of the whole world: each follower, waiting twice the hang timeout, names
  //    the leader.
  Comm followers = world.split(r == 0 ? 0 : 1, r);  // {0} and {1, 2}
  if (r != 0) g_followers = &followers;
  g_events.clear();
  g_reasons.clear();
  liveness_begin_step(8, "forward");
  if (r == 0) raise(SIGSTOP);
  float y = 1;
  world.all_reduce_sum(&y, 1);
  CHECK(y == 3);
  if (r != 0) {
    const LivenessEvent* hang = last_of(LivenessEventKind::hang);
    CHECK(hang != nullptr && hang->culprits == std::vector<int32_t>{0});
    CHECK_MSG(g_reasons.size() == 1 && g_reasons[0].find("rank 0 on ") == 0 &&
                  g_reasons[0].find(" in iteration 8 (forward: all-reduce)") != std::string::npos,
              "%s", g_reasons.empty() ? "(no reason)" : g_reasons[0].c_str());
  }
  g_followers = nullptr;

  // 3. Plans of every size arrive whole and in order, the large ones too (MPI's rendezvous path).
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{70000}, size_t{1} << 20}) {
    std::vector<uint8_t> plan(n);
    for (size_t i = 0; i < n; ++i) plan[i] = static_cast<uint8_t>(i * 7 + n);
    if (r == 0) channel.send_plan(plan);
    else CHECK_MSG(channel.receive_plan() == plan, "a plan of %zu bytes", n);
  }
  channel.close();
  comm_finalize();
  std::printf("rank %d: %d checks passed, %d failed\n", r, check::passes, check::failures);
  return check::failures == 0 ? 0 : 1;
}
