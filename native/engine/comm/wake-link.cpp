#include "comm/wake-link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <random>

namespace engine {
namespace {

constexpr int kHandshakeMs = 10000;  // the peer is already connected or accepting: only a wedged one takes this long

// An abstract address: sun_path starts with a NUL, the name follows (no terminator, length in addrlen).
socklen_t abstract_address(const std::string& name, sockaddr_un& addr) {
  addr = sockaddr_un{};
  addr.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  name.copy(addr.sun_path + 1, n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// Reads or writes exactly `n` bytes within the handshake's bound.
bool transfer(int fd, void* data, size_t n, bool reading) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    if (poll(&pfd, 1, kHandshakeMs) <= 0) return false;
    const ssize_t got = reading ? recv(fd, p, n, MSG_DONTWAIT) : send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Empties a socket's buffer; false when the other end closed it (or it failed).
bool drain(int fd) {
  char buf[256];
  for (;;) {
    const ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (got > 0) continue;
    if (got < 0 && errno == EINTR) continue;
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

WakeListener::WakeListener() {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return;
  // Unique per job: the leader's pid, and randomness for pid namespaces that share a network namespace.
  char name[64];
  std::snprintf(name, sizeof(name), "trtllm-wake-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(std::random_device{}()) << 32 ^ std::random_device{}());
  sockaddr_un addr;
  const socklen_t len = abstract_address(name, addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listen_fd_, 1024) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  name_ = name;
}

WakeListener::~WakeListener() {
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : fds_) close(fd);
}

void WakeListener::accept(int32_t count) {
  for (int32_t i = 0; i < count && listen_fd_ >= 0; ++i) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, kHandshakeMs) <= 0) break;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    // Only our own user's processes: any local process could connect to an abstract name while it exists.
    ucred peer{};
    socklen_t len = sizeof(peer);
    const bool ours = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.uid == getuid();
    int32_t rank = -1;
    const char ack = 'a';
    if (ours && transfer(fd, &rank, sizeof(rank), true) && transfer(fd, const_cast<char*>(&ack), 1, false)) {
      fds_.push_back(fd);
    } else {
      close(fd);
    }
  }
  // Nobody else may connect: the abstract name disappears with the socket.
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void WakeListener::wake_sleepers() {
  if (fds_.empty()) return;
  std::vector<pollfd> pfds(fds_.size());
  for (size_t i = 0; i < fds_.size(); ++i) pfds[i] = pollfd{fds_[i], POLLIN, 0};
  if (poll(pfds.data(), pfds.size(), 0) <= 0) return;
  bool dropped = false;
  for (size_t i = 0; i < pfds.size(); ++i) {
    if (pfds[i].revents == 0) continue;
    const char wake = 'w';
    if (!drain(fds_[i]) || (send(fds_[i], &wake, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)) {
      close(fds_[i]);  // the follower is gone; mpirun reports that, the link just goes quiet
      fds_[i] = -1;
      dropped = true;
    }
  }
  if (dropped) fds_.erase(std::remove(fds_.begin(), fds_.end(), -1), fds_.end());
}

int32_t WakeListener::linked() const { return static_cast<int32_t>(fds_.size()); }

WakeSleeper::~WakeSleeper() { drop(); }

void WakeSleeper::drop() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool WakeSleeper::connect(const std::string& name, int32_t rank) {
  if (name.empty()) return false;
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return false;
  sockaddr_un addr;
  const socklen_t len = abstract_address(name, addr);
  // A Unix stream connect completes at once (queued in the listener's backlog) or fails at once: another network
  // namespace, say, where the name does not exist.
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || !transfer(fd_, &rank, sizeof(rank), false)) {
    drop();
    return false;
  }
  return true;
}

bool WakeSleeper::confirm() {
  char ack = 0;
  if (fd_ < 0 || !transfer(fd_, &ack, 1, true) || ack != 'a') {
    drop();
    return false;
  }
  return true;
}

void WakeSleeper::announce() {
  if (fd_ < 0) return;
  const char sleeping = 's';
  if (send(fd_, &sleeping, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EINTR) drop();
}

bool WakeSleeper::sleep(std::chrono::milliseconds max) {
  if (fd_ < 0) return false;
  pollfd pfd{fd_, POLLIN, 0};
  const int ready = poll(&pfd, 1, static_cast<int>(max.count()));
  if (ready <= 0) return false;
  if (!drain(fd_)) drop();
  return true;
}

}  // namespace engine
