// Every position's mask of a newly compiled guide, computed on one background thread (GrammarCache's): a request
// step that enters a position never met before otherwise walks the vocabulary itself (~5 ms at 128k tokens on one
// core) while its batch waits, and with equal positions sharing walks (position-signature.h) a guide's every
// position costs ~0.1 s of one core at 128k (bench/RESULTS.md). Steps still compute what the thread has not reached
// yet (CompiledGrammar is thread-safe: the first mask stored wins), so nothing ever waits for it. One thread, no
// OpenMP: the executor's own threads keep the cores; a guide evicted meanwhile is dropped at the next slice.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "grammar/compiled-grammar.h"

namespace engine::grammar {

class BackgroundMasks {
 public:
  BackgroundMasks();
  ~BackgroundMasks();  // stops at the next slice of positions and joins
  BackgroundMasks(const BackgroundMasks&) = delete;
  BackgroundMasks& operator=(const BackgroundMasks&) = delete;

  void submit(std::weak_ptr<const CompiledGrammar> grammar);
  // Blocks until every submitted guide is done or dropped (tests order their checks with it).
  void wait_idle();

  static constexpr size_t kSlice = 32;  // positions computed between checks for stop / eviction

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::weak_ptr<const CompiledGrammar>> queue_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;  // (last: started once the members above exist)
};

}  // namespace engine::grammar
