#include "comm/leader-channel.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "comm/comm-wait.h"
#include "comm/idle-pause.h"
#include "comm/liveness-watch.h"
#include "comm/wake-link.h"

namespace engine {

struct LeaderChannel::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  WatchedChannel watched;
  IdleWait idle = IdleWait::sleep;
  std::unique_ptr<WakeListener> listener;  // leader
  WakeSleeper sleeper;                     // follower
  bool closed = false;
  // Leader: plans sent and not yet known complete, oldest first, with their bytes (MPI reads them until then).
  struct PlanSend {
    std::vector<uint8_t> bytes;
    std::vector<MPI_Request> requests;
  };
  std::deque<PlanSend> sends;
};

namespace {

constexpr size_t kHost = 256;
constexpr size_t kName = 128;

// Every rank's host, in rank order (collective).
std::vector<std::string> gather_hosts(MPI_Comm comm, int32_t size) {
  char mine[kHost] = {0};
  gethostname(mine, kHost - 1);
  std::vector<char> all(kHost * static_cast<size_t>(size));
  comm_check(MPI_Allgather(mine, kHost, MPI_CHAR, all.data(), kHost, MPI_CHAR, comm), "MPI_Allgather (hosts)");
  std::vector<std::string> hosts;
  for (int32_t r = 0; r < size; ++r) hosts.emplace_back(all.data() + kHost * static_cast<size_t>(r));
  return hosts;
}

// The wake links between the leader and the followers on its host (collective): the leader listens and says where,
// those followers connect, the leader learns how many did and accepts exactly them, they wait for its ack.
void link_followers(LeaderChannel::Impl& c) {
  const int32_t rank = c.watched.rank, size = c.watched.size;
  char name[kName] = {0};
  if (rank == 0 && c.idle == IdleWait::sleep) {
    c.listener = std::make_unique<WakeListener>();
    std::snprintf(name, kName, "%s", c.listener->name().c_str());
  }
  comm_check(MPI_Bcast(name, kName, MPI_CHAR, 0, c.comm), "MPI_Bcast (wake link)");
  int connected = 0;
  if (rank != 0 && c.idle == IdleWait::sleep && c.watched.hosts[static_cast<size_t>(rank)] == c.watched.hosts[0]) {
    connected = c.sleeper.connect(name, rank) ? 1 : 0;
  }
  std::vector<int> all(static_cast<size_t>(size));
  comm_check(MPI_Gather(&connected, 1, MPI_INT, all.data(), 1, MPI_INT, 0, c.comm), "MPI_Gather (wake link)");
  if (rank == 0 && c.listener) {
    int32_t count = 0;
    for (int v : all) count += v;
    c.listener->accept(count);
    c.watched.wake = c.listener.get();
  } else if (connected) {
    c.sleeper.confirm();
  }
}

}  // namespace

LeaderChannel::LeaderChannel(const Comm& world, const LivenessSettings& settings) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  comm_check(MPI_Comm_dup(CommAccess::handle(world), &c.comm), "MPI_Comm_dup (leader channel)");
  MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN);
  c.watched.comm = c.comm;
  c.watched.rank = world.rank();
  c.watched.size = world.size();
  c.watched.settings = settings;
  c.idle = idle_wait_from_env();
  c.watched.hosts = gather_hosts(c.comm, c.watched.size);
  link_followers(c);
  liveness_attach(&c.watched);
}

LeaderChannel::~LeaderChannel() { close(); }

void LeaderChannel::finish_sends(int32_t below) {
  Impl& c = *impl_;
  const size_t n = static_cast<size_t>(std::clamp(below, 1, c.watched.size) - 1);  // (requests[i]: rank i + 1)
  for (Impl::PlanSend& send : c.sends) {
    std::vector<MPI_Request> some(send.requests.begin(), send.requests.begin() + static_cast<std::ptrdiff_t>(n));
    wait_all(some, WaitSite{"plan send", c.comm, -1});
    std::copy(some.begin(), some.end(), send.requests.begin());  // (MPI_REQUEST_NULL now)
  }
  if (n + 1 == static_cast<size_t>(c.watched.size)) c.sends.clear();
}

void LeaderChannel::close() {
  Impl& c = *impl_;
  if (c.closed) return;
  c.closed = true;
  // The last plan (the shutdown) reaches every follower after all earlier ones; wait for them while the liveness
  // watch still bounds the wait.
  finish_sends();
  liveness_attach(nullptr);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && c.comm != MPI_COMM_NULL) MPI_Comm_free(&c.comm);
  c.listener.reset();
}

void LeaderChannel::send_plan(std::vector<uint8_t> bytes) {
  Impl& c = *impl_;
  if (bytes.size() > static_cast<size_t>(INT_MAX)) comm_abort(3, "an iteration plan of more than INT_MAX bytes");
  // Earlier plans whose sends are done are let go. A send may stay open until its follower next enters MPI (Open
  // MPI completes even a small one only then), so none is waited for here unless too many are open: waiting
  // would keep the leader from computing its stage of the next micro-batch while a later stage computes this one.
  constexpr size_t kMaxOpen = 16;
  while (!c.sends.empty()) {
    int done = 0;
    std::vector<MPI_Request>& front = c.sends.front().requests;
    comm_check(MPI_Testall(static_cast<int>(front.size()), front.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall (plan)");
    if (!done && c.sends.size() < kMaxOpen) break;
    if (!done) wait_all(front, WaitSite{"plan send", c.comm, -1});
    c.sends.pop_front();
  }
  Impl::PlanSend& send = c.sends.emplace_back();
  send.bytes = std::move(bytes);
  send.requests.assign(static_cast<size_t>(c.watched.size - 1), MPI_REQUEST_NULL);
  const int n = static_cast<int>(send.bytes.size());
  for (int32_t r = 1; r < c.watched.size; ++r) {
    comm_check(MPI_Isend(send.bytes.data(), n, MPI_BYTE, r, kTagPlan, c.comm, &send.requests[static_cast<size_t>(r - 1)]),
               "MPI_Isend (plan)");
  }
  // After the sends: a follower woken now finds its plan at its first look.
  if (c.listener) c.listener->wake_sleepers();
}

std::vector<uint8_t> LeaderChannel::receive_plan() {
  Impl& c = *impl_;
  const WaitSite site{"the next plan", c.comm, -1};
  LivenessWait wait(site, WaitKind::next_plan);
  IdlePause pause(c.idle, c.sleeper);
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    comm_check(MPI_Improbe(0, MPI_ANY_TAG, c.comm, &flag, &message, &status), "MPI_Improbe (the next plan)");
    if (flag && status.MPI_TAG == kTagQuery) {
      liveness_answer(message);
      continue;
    }
    if (flag) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      std::vector<uint8_t> bytes(static_cast<size_t>(count));
      comm_check(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv (plan)");
      return bytes;
    }
    wait.tick();
    pause.pause();
  }
}

int32_t LeaderChannel::followers_linked() const { return impl_->listener ? impl_->listener->linked() : 0; }

}  // namespace engine
