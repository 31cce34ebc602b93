// The leader's verdict on a stuck gang (pure): the ranks that did not answer are named with the step the gang was
// in; when every rank answered, none is named and each one's wait is listed.
#include <vector>

#include "check.h"
#include "comm/liveness-verdict.h"

using namespace engine;

static RankActivity rank_activity(int32_t rank, bool answered, const char* step, const char* waiting_for) {
  RankActivity a;
  a.rank = rank;
  a.host = rank == 3 ? "node-b" : "node-a";
  a.answered = answered;
  a.iteration = 1234;
  a.step = step;
  a.waiting_for = waiting_for;
  a.seconds = answered ? 12.5 : 0;
  return a;
}

TEST_MAIN({
  RankActivity leader = rank_activity(0, true, "forward", "all-reduce");
  leader.seconds = 30.04;

  // One follower stopped: named, with the leader's step.
  HangVerdict one = judge_hang(leader, {rank_activity(1, false, "", ""), rank_activity(2, true, "forward", "all-reduce")});
  CHECK(one.culprits == std::vector<int32_t>{1});
  CHECK_MSG(one.reason == "rank 1 on node-a made no progress for 30.0 s in iteration 1234 (forward: all-reduce)", "%s",
            one.reason.c_str());

  // Two silent ranks on two hosts, in rank order.
  HangVerdict two = judge_hang(leader, {rank_activity(1, false, "", ""), rank_activity(3, false, "", "")});
  CHECK((two.culprits == std::vector<int32_t>{1, 3}));
  CHECK_MSG(two.reason == "rank 1 on node-a, rank 3 on node-b made no progress for 30.0 s in iteration 1234 (forward: all-reduce)",
            "%s", two.reason.c_str());

  // Everybody answered: a protocol bug, not a dead rank; nobody is named, every wait is listed.
  HangVerdict none = judge_hang(leader, {rank_activity(1, true, "forward", "recv from rank 2"), rank_activity(2, true, "idle", "the next plan")});
  CHECK(none.culprits.empty());
  CHECK_MSG(none.reason == "no rank made progress for 30.0 s in iteration 1234 (forward: all-reduce); every rank answered: "
                           "rank 1 in iteration 1234 (forward: recv from rank 2); rank 2 in iteration 1234 (idle: the next plan)",
            "%s", none.reason.c_str());

  // A rank that computes waits for nobody: its activity is its step alone.
  CHECK(describe_activity(rank_activity(1, true, "forward", "")) == "forward");
})
