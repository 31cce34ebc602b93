#include "grammar/grammar-cache.h"

#include "grammar/gbnf-parser.h"
#include "grammar/json-schema-to-gbnf.h"
#include "grammar/regex-to-gbnf.h"

namespace engine::grammar {

std::string guide_to_gbnf(const GuidedDecodingParams& guide) {
  switch (guide.guide_type) {
    case GuideType::json:
      return json_any_gbnf(/*object_only=*/false);
    case GuideType::json_schema:
      return json_schema_to_gbnf(guide.guide);
    case GuideType::regex: {
      std::string rules;
      const std::string top = regex_to_gbnf(guide.guide, "re", rules);
      return "root ::= " + top + "\n" + rules;
    }
    case GuideType::ebnf_grammar:
      return guide.guide;
  }
  return guide.guide;
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity, bool background,
                           int64_t max_waited_work)
    : vocab_(std::move(vocab)), capacity_(capacity) {
  const char* env = std::getenv("TRTLLM_GRAMMAR_BACKGROUND_MASKS");
  if (background && (env == nullptr || std::string(env) != "0"))
    background_ = std::make_unique<BackgroundMasks>(max_waited_work);
}

void GrammarCache::wait_for_background() {
  if (background_) background_->wait_idle();
}

void GrammarCache::set_on_masks_ready(std::function<void()> on_ready) {
  if (background_) background_->set_on_settled(std::move(on_ready));
}

void GrammarCache::hold_background(bool held) {
  if (background_) background_->hold(held);
}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const GuidedDecodingParams& guide) {
  std::string key = std::string(guide_type_name(guide.guide_type)) + '\n' + guide.guide;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key);
    if (it != entries_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      return it->second.first;
    }
  }
  // Compiled outside the lock: a large schema must not hold up requests whose grammar is cached.
  const std::string gbnf = guide_to_gbnf(guide);
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf, guide_type_name(guide.guide_type)), vocab_,
                                                          CompiledGrammarOptions{share_masks_, masks_});
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(key);
  if (it != entries_.end()) return it->second.first;  // compiled meanwhile by another caller
  order_.push_front(key);
  entries_.emplace(std::move(key), std::make_pair(compiled, order_.begin()));
  if (background_) background_->submit(compiled);
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace engine::grammar
