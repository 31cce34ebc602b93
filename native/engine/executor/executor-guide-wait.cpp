// Guided requests wait in the queue for their guide's masks (ExecutorConfig::GuidedDecodingConfig). The grammar
// cache's background thread computes a newly compiled guide's every position; until it has, a request of that guide
// is left out of the scheduler's view of the queue — it takes no slot and no KV block, and the requests behind it
// are admitted as if it were not there — so no step of it ever walks the vocabulary while its batch waits. When the
// thread is done with a guide it wakes the loop, which finds the request schedulable at its place in the queue.
// Only the leader's executor schedules (leader mode: followers replay its plans), so a waiting request never reaches
// another rank; a device model's executor waits the same way.
#include <cstdlib>
#include <string>

#include "executor/executor-impl.h"

namespace engine {
namespace {

// Distinct guides kept compiled (with their token masks); a service's schemas are usually a handful.
constexpr size_t kGrammarCacheEntries = 256;

}  // namespace

void Executor::Impl::setup_guided_decoding() {
  ExecutorConfig::GuidedDecodingConfig& g = *config.guided_decoding;
  if (g.max_waited_work < 0) {
    throw EngineError(ErrorCode::invalid_argument, "guided_decoding.max_waited_work must be >= 0 (0: the default), got " +
                                                       std::to_string(g.max_waited_work));
  }
  auto vocab = std::make_shared<const grammar::TokenVocab>(g.encoded_vocab, vocab_size);
  grammars = std::make_unique<grammar::GrammarCache>(
      std::move(vocab), kGrammarCacheEntries, /*background=*/true,
      g.max_waited_work > 0 ? g.max_waited_work : grammar::BackgroundMasks::kMaxWaitedWork);
  g.encoded_vocab.clear();  // the vocabulary holds its own copy
  g.encoded_vocab.shrink_to_fit();
  const char* env = std::getenv("TRTLLM_GRAMMAR_WAIT_FOR_MASKS");
  wait_for_masks = env == nullptr || std::string(env) != "0";
  // The loop sleeps while every queued request waits for masks: a guide finished wakes it. (The cache is declared
  // after mu and wake, so it and its thread go first.)
  grammars->set_on_masks_ready([this] {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (loop_state == LoopState::idle) loop_state = LoopState::running;  // about to look again: not idle yet
    }
    wake.notify_one();
  });
}

bool Executor::Impl::awaits_masks(const Sequence& s) const {
  // (A request that has started never waits again: a paused one resumes whatever its guide.)
  return wait_for_masks && s.matcher && !s.ever_scheduled && s.matcher->grammar().masks_pending();
}

bool Executor::Impl::queue_has_ready() const {
  for (const Sequence* s : queue)
    if (!awaits_masks(*s)) return true;
  return false;
}

}  // namespace engine
