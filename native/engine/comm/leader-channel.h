// The leader's own line to its followers, beside the model's collectives (issue 22). Iteration plans go out over it
// point to point — each follower receives its plan straight from the leader, so a follower that sleeps delays no
// other — and a follower waits for the next one without spinning once the leader is idle (idle-pause.h, wake-link.h);
// the liveness watch asks and answers over it (liveness.h). One per process while it serves in leader mode.
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "comm/liveness.h"

namespace engine {

class LeaderChannel {
 public:
  // Collective over `world` (rank 0 leads): duplicates its communicator, learns every rank's host, links the
  // followers on the leader's host to it, and attaches the liveness watch with `settings` until close().
  LeaderChannel(const Comm& world, const LivenessSettings& settings);
  ~LeaderChannel();
  LeaderChannel(const LeaderChannel&) = delete;
  LeaderChannel& operator=(const LeaderChannel&) = delete;

  // Leader: `bytes` to every follower, in order. Returns once the sends are posted: the channel keeps the bytes
  // until MPI is done with them (close() waits for the last). Open MPI moves a large plan (a prefill's) only while
  // the leader is inside MPI: a leader about to wait outside MPI for something a follower does with the plan (its
  // GPU, a NCCL call) first waits for the sends (finish_sends).
  void send_plan(std::vector<uint8_t> bytes);
  // Waits until every plan sent so far reached the followers of world rank below `below` (all of them by default).
  void finish_sends(int32_t below = INT32_MAX);
  // Follower: the leader's next plan, answering the liveness watch's questions while it waits.
  std::vector<uint8_t> receive_plan();
  // Detaches the watch and frees the communicator; idempotent. Each rank calls it once the shutdown plan went out
  // (leader) or came in (follower).
  void close();

  int32_t followers_linked() const;  // leader: followers that sleep on the wake link (the rest sleep on a timer)

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine
