// Every position's mask of a newly compiled grammar, computed ahead of use by a background thread and its OpenMP
// team (XGrammar's compile step computes them all before the first token; we let requests start at once instead).
// Requests that reach a position before the thread does compute it themselves, as without it; either way the mask
// is stored once (CompiledGrammar::store keeps the first). The threads run at the lowest CPU priority, so a CPU
// backend's forward passes keep their cores; the thread leaves a grammar once nothing else holds it (evicted from
// the cache, no request left), and stops adding masks to one past `max_bytes_per_grammar`.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "grammar/compiled-grammar.h"

namespace engine::grammar {

class BackgroundMasks {
 public:
  explicit BackgroundMasks(size_t max_bytes_per_grammar);
  ~BackgroundMasks();  // stops after the position in hand
  BackgroundMasks(const BackgroundMasks&) = delete;
  BackgroundMasks& operator=(const BackgroundMasks&) = delete;

  void add(const std::shared_ptr<const CompiledGrammar>& grammar);
  // Blocks until every grammar added so far is done with (tests; a bench measuring what is left after it).
  void wait_idle();

 private:
  void run();
  // Computes the positions of `weak` in order while it lives, within the byte budget, and until stop.
  void fill(const std::weak_ptr<const CompiledGrammar>& weak);

  const size_t max_bytes_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::weak_ptr<const CompiledGrammar>> queue_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;  // started by the first add()
};

}  // namespace engine::grammar
