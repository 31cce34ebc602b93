// Guides compiled once: a request's guide (type + text) becomes a CompiledGrammar through the front-end for its type
// (JSON Schema, regex, GBNF), kept by content so the next request with the same schema reuses the grammar and every
// token mask already computed for it. Least recently used entries leave first.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/background-masks.h"
#include "grammar/compiled-grammar.h"
#include "scheduling/request.h"

namespace engine::grammar {

// The GBNF text a guide stands for. Throws EngineError(invalid_argument) naming the construct and where it is.
std::string guide_to_gbnf(const GuidedDecodingParams& guide);

class GrammarCache {
 public:
  // background: every new guide's masks are computed ahead on a thread of the cache's (background-masks.h);
  // TRTLLM_GRAMMAR_BACKGROUND_MASKS=0 turns that off for every cache (and with it every wait for masks).
  // max_waited_work: BackgroundMasks's bound on the guides worth waiting for (tests lower it).
  GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity, bool background = true,
               int64_t max_waited_work = BackgroundMasks::kMaxWaitedWork);
  // Thread-safe. Throws what guide_to_gbnf / parse_gbnf throw.
  std::shared_ptr<const CompiledGrammar> get(const GuidedDecodingParams& guide);
  size_t size() const;
  // Returns once the background thread has done every guide compiled so far (at once without one).
  void wait_for_background();
  // Called on the background thread whenever a guide stops being pending (BackgroundMasks::set_on_settled). Set it
  // before the first get(); it must outlive the cache's thread (the cache joins it when destroyed).
  void set_on_masks_ready(std::function<void()> on_ready);
  // Test hook: holds / releases the background thread (BackgroundMasks::hold); nothing without one.
  void hold_background(bool held);

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  // The masks every guide's positions share (mask-store.h): a new guide reuses the walks of earlier ones.
  std::shared_ptr<MaskStore> masks_ = std::make_shared<MaskStore>(/*long_lived=*/true);
  // TRTLLM_GRAMMAR_SHARE_MASKS=0: every position walks the vocabulary itself (to measure what sharing gains).
  bool share_masks_ = [] {
    const char* v = std::getenv("TRTLLM_GRAMMAR_SHARE_MASKS");
    return v == nullptr || std::string(v) != "0";
  }();
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>> entries_;
  std::unique_ptr<BackgroundMasks> background_;  // (last: stopped before the rest goes)
};

}  // namespace engine::grammar
