// How a follower sleeps while its leader is idle, and how the leader wakes it (no MPI here). MPI has no blocking wait
// that sleeps — Open MPI's blocking calls poll its progress engine, a core each — and timed sleeps between polls
// trade idle CPU against the first request's latency (a sleep of 1 ms costs up to 1 ms). So a follower on the
// leader's host sleeps on a Unix socket instead: it says "I sleep" (one byte), looks once more for a message, then
// sleeps in poll(2); the leader, after sending anything to its followers, writes one byte to each that said so. The
// wake costs one system call, and nothing when no follower sleeps. Abstract socket names (Linux): nothing in the file
// system, nothing left behind when a process dies. A follower on another host, or one that cannot connect, has no
// link and sleeps on a timer instead (leader-channel.cpp).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace engine {

// The leader's end.
class WakeListener {
 public:
  // Listens on a fresh abstract name; name() is empty when it could not (then no follower links).
  WakeListener();
  ~WakeListener();
  WakeListener(const WakeListener&) = delete;
  WakeListener& operator=(const WakeListener&) = delete;
  const std::string& name() const { return name_; }
  // Takes the `count` followers that connected (they wait in the backlog): reads each one's rank, acknowledges it,
  // and stops listening. A follower that does not say its rank within a few seconds is dropped (it times out too).
  void accept(int32_t count);
  // One byte to every follower that said it sleeps (one poll(2) over all links; a closed link is dropped).
  void wake_sleepers();
  int32_t linked() const;  // followers linked now

 private:
  int listen_fd_ = -1;
  std::string name_;
  std::vector<int> fds_;  // one per linked follower
};

// A follower's end.
class WakeSleeper {
 public:
  WakeSleeper() = default;
  ~WakeSleeper();
  WakeSleeper(const WakeSleeper&) = delete;
  WakeSleeper& operator=(const WakeSleeper&) = delete;
  // Connects to the leader's `name` and says `rank`; false (no link) when it cannot.
  bool connect(const std::string& name, int32_t rank);
  // After the leader's accept(): waits for its acknowledgement; false (the link is dropped) when none comes.
  bool confirm();
  bool linked() const { return fd_ >= 0; }
  // "I am going to sleep": the leader's next send wakes this follower. Look for messages once more after it.
  void announce();
  // Sleeps until the leader wakes it, or `max`; true when woken (a byte came, or the leader's end closed: then the
  // link is dropped and later sleeps are the caller's timed ones).
  bool sleep(std::chrono::milliseconds max);

 private:
  void drop();
  int fd_ = -1;
};

}  // namespace engine
