#include "grammar/background-masks.h"

#include <algorithm>
#include <vector>

namespace engine::grammar {

BackgroundMasks::BackgroundMasks() : thread_([this] { run(); }) {}

BackgroundMasks::~BackgroundMasks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void BackgroundMasks::submit(std::weak_ptr<const CompiledGrammar> grammar) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(grammar));
  }
  wake_.notify_all();
}

void BackgroundMasks::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
}

void BackgroundMasks::run() {
  for (;;) {
    std::weak_ptr<const CompiledGrammar> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      busy_ = false;
      idle_.notify_all();
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
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
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
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
  }
}

}  // namespace engine::grammar
