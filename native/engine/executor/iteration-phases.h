// TRTLLM_ITER_PHASES=1: where a decode-only iteration's host time goes (plan and chunks, the forward call and the
// sampling prep inside it, the guided checks, the updates, the redraws, delivery), summed from the time the executor
// gets work until it has none left (a benchmark's round) and printed to stderr then. A diagnostic for benchmarks;
// off, it costs a clock read and a branch per phase.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace engine {

enum class IterPhase { plan, forward, to_prep, prep, after_prep, guided_check, update, redraw, redraw_copy, deliver, count };

class IterationPhases {
 public:
  IterationPhases();
  bool on() const { return on_; }
  using Clock = std::chrono::steady_clock;
  void add(IterPhase p, Clock::time_point since) {
    if (on_ && decode_) sums_[static_cast<size_t>(p)] += std::chrono::duration<double, std::micro>(Clock::now() - since).count();
  }
  // Whether the iteration being timed is decode-only (only those are summed), and one more of them.
  void begin(bool decode_only) {
    decode_ = decode_only;
    if (on_ && decode_) ++iterations_;
  }
  void count_redraw() {
    if (on_ && decode_) ++redraws_;
  }
  // A guided check's row (any thread): its own time, to set beside the check's wall time.
  void add_row_work(Clock::time_point since) {
    if (!on_ || !decode_) return;
    row_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count(),
                      std::memory_order_relaxed);
    rows_.fetch_add(1, std::memory_order_relaxed);
  }
  // Prints the sums (when on and anything was timed) and starts again; the loop thread calls it when the executor
  // runs out of work and as it stops.
  void report();

 private:
  bool on_ = false, decode_ = false;
  int64_t iterations_ = 0, redraws_ = 0;
  std::atomic<int64_t> row_ns_{0}, rows_{0};
  std::array<double, static_cast<size_t>(IterPhase::count)> sums_{};
};

}  // namespace engine
