// Every position's mask of a newly compiled guide, computed on one background thread (GrammarCache's): a request
// step that enters a position never met before otherwise walks the vocabulary itself (~5 ms at 128k tokens on one
// core) while its batch waits, and with equal positions sharing walks (position-signature.h) a guide's every
// position costs ~0.1 s of one core at 128k (bench/RESULTS.md). The executor holds a guide's requests in its queue
// until the thread is done with the guide (CompiledGrammar::masks_pending), as vLLM holds requests until their
// grammar is compiled, so their every step finds its masks computed; a guide too large to be worth that wait
// (kMaxWaitedWork) is computed all the same, and its requests start at once and compute what the thread has not
// reached (CompiledGrammar is thread-safe: the first mask stored wins). One thread, no OpenMP: the executor's own
// threads keep the cores; a guide evicted meanwhile and held by no request is dropped at the next slice.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "grammar/compiled-grammar.h"

namespace engine::grammar {

class BackgroundMasks {
 public:
  // A guide of `positions` byte positions over a vocabulary of `tokens` text tokens is waited for while
  // positions * tokens <= max_waited_work.
  explicit BackgroundMasks(int64_t max_waited_work = kMaxWaitedWork);
  ~BackgroundMasks();  // stops at the next slice of positions and joins; no guide stays pending
  BackgroundMasks(const BackgroundMasks&) = delete;
  BackgroundMasks& operator=(const BackgroundMasks&) = delete;

  // Queues the guide, marking it pending (CompiledGrammar::masks_pending) when it is worth waiting for.
  void submit(const std::shared_ptr<const CompiledGrammar>& grammar);
  // Called on the thread, outside its lock, each time a pending guide stops being pending (done, given up after an
  // error, or stopped): the executor wakes its loop with it, so requests waiting for masks start without polling.
  void set_on_settled(std::function<void()> on_settled);
  // Blocks until every submitted guide is done or dropped (tests order their checks with it; never returns while
  // held with guides queued).
  void wait_idle();
  // Test hook: while held the thread takes no guide and computes no slice (it stops after the slice in progress),
  // so a test can keep a guide pending as long as it needs; destruction still stops it.
  void hold(bool held);

  static constexpr size_t kSlice = 32;  // positions computed between checks for stop / hold / eviction
  // The largest guide whose requests wait, in positions x vocabulary tokens (a position's walk steps through the
  // vocabulary, so its cost grows with both): 2^32 is ~33,500 positions at Llama-3's 128,256 tokens. The largest
  // schema of test/fixtures/json-schemas (40-recipe, 27,100 positions) takes 0.53 s of one core with shared walks at
  // that size, the median one 0.1 s (bench/RESULTS.md): a first request's time to first token may grow by that much,
  // not by the seconds a larger guide could take; such a guide's requests run at once, as without the thread.
  static constexpr int64_t kMaxWaitedWork = int64_t{1} << 32;

 private:
  void run();
  // The guide stops being pending, and the executor hears of it (outside mutex_).
  void settle(const std::shared_ptr<const CompiledGrammar>& grammar);

  const int64_t max_waited_work_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::weak_ptr<const CompiledGrammar>> queue_;
  std::function<void()> on_settled_;
  bool busy_ = false, stop_ = false, held_ = false;
  std::thread thread_;  // (last: started once the members above exist)
};

}  // namespace engine::grammar
