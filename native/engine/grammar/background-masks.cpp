#include "grammar/background-masks.h"

#include <algorithm>
#include <vector>

namespace engine::grammar {

BackgroundMasks::BackgroundMasks(int64_t max_waited_work)
    : max_waited_work_(max_waited_work), thread_([this] { run(); }) {}

BackgroundMasks::~BackgroundMasks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // The guides never reached: a request still holding one (the executor has already stopped by now) must not read
  // it as pending.
  for (const auto& queued : queue_)
    if (auto g = queued.lock()) g->masks_pending_.store(false, std::memory_order_release);
}

void BackgroundMasks::submit(const std::shared_ptr<const CompiledGrammar>& grammar) {
  int64_t positions = 0;
  for (const Position& p : grammar->grammar().positions()) positions += p.kind == Position::bytes ? 1 : 0;
  const int64_t tokens = static_cast<int64_t>(grammar->vocab().sorted().size());
  // (Set before the guide is queued, so the thread's clearing always comes after it.)
  if (positions * tokens <= max_waited_work_) grammar->masks_pending_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(grammar);
  }
  wake_.notify_all();
}

void BackgroundMasks::set_on_settled(std::function<void()> on_settled) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_settled_ = std::move(on_settled);
}

void BackgroundMasks::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
}

void BackgroundMasks::hold(bool held) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = held;
  }
  wake_.notify_all();
}

void BackgroundMasks::settle(const std::shared_ptr<const CompiledGrammar>& grammar) {
  if (!grammar || !grammar->masks_pending_.exchange(false, std::memory_order_acq_rel)) return;
  std::function<void()> on_settled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    on_settled = on_settled_;
  }
  if (on_settled) on_settled();
}

void BackgroundMasks::run() {
  for (;;) {
    std::weak_ptr<const CompiledGrammar> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      busy_ = false;
      idle_.notify_all();
      wake_.wait(lock, [this] { return stop_ || (!held_ && !queue_.empty()); });
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::vector<int32_t> positions;
    if (auto g = next.lock()) {
      const auto& all = g->grammar().positions();
      for (size_t p = 0; p < all.size(); ++p)
        if (all[p].kind == Position::bytes && !g->has_mask(static_cast<int32_t>(p)))
          positions.push_back(static_cast<int32_t>(p));
    }
    for (size_t at = 0; at < positions.size(); at += kSlice) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || !held_; });
        if (stop_) {
          lock.unlock();
          settle(next.lock());  // (its requests start and compute their own masks, as without the thread)
          return;
        }
      }
      auto g = next.lock();
      if (!g) break;  // evicted and no request holds it: nobody needs its masks
      const size_t end = std::min(positions.size(), at + kSlice);
      try {
        g->compute_serial({positions.begin() + static_cast<std::ptrdiff_t>(at),
                           positions.begin() + static_cast<std::ptrdiff_t>(end)});
      } catch (...) {
        break;  // (out of memory: the steps compute what they need, as without this thread)
      }
    }
    settle(next.lock());
  }
}

}  // namespace engine::grammar
