#include "grammar/background-masks.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <vector>

namespace engine::grammar {

BackgroundMasks::BackgroundMasks(size_t max_bytes_per_grammar) : max_bytes_(max_bytes_per_grammar) {}

BackgroundMasks::~BackgroundMasks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundMasks::add(const std::shared_ptr<const CompiledGrammar>& grammar) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(grammar);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void BackgroundMasks::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
}

void BackgroundMasks::run() {
  // Linux: the nice value of this thread alone (its tid), inherited by the OpenMP team it starts, so the executor's
  // and the forward passes' threads keep the cores; the team takes every core that is idle.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  omp_set_num_threads(std::max(1, omp_get_num_procs()));  // (the cores this process may run on)
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    const std::weak_ptr<const CompiledGrammar> next = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      fill(next);
    } catch (...) {  // (out of memory) what is missing is computed on first use, where the error is reported
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  idle_.notify_all();
}

void BackgroundMasks::fill(const std::weak_ptr<const CompiledGrammar>& weak) {
  // A few positions at a time, each over every core (CompiledGrammar::precompute), checking between them whether
  // to go on.
  constexpr size_t kPositionsAtOnce = 16;
  for (size_t pos = 0;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    const std::shared_ptr<const CompiledGrammar> g = weak.lock();
    const size_t n = g ? g->grammar().positions().size() : 0;
    if (pos >= n || g->mask_bytes() >= max_bytes_) return;
    std::vector<int32_t> some;
    for (; pos < n && some.size() < kPositionsAtOnce; ++pos)
      if (g->grammar().positions()[pos].kind == Position::bytes) some.push_back(static_cast<int32_t>(pos));
    g->precompute(std::move(some));  // (skips what requests computed meanwhile)
  }
}

}  // namespace engine::grammar
