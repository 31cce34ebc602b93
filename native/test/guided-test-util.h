// The vocabulary and request shape of the executor's guided-decoding tests (executor-guided.cpp,
// executor-guide-wait.cpp): 64 ids over the FakeModel, whose greedy choice ignores any grammar.
#pragma once
#include <string>
#include <vector>

#include "executor-test-util.h"

namespace test {

inline constexpr int32_t kGuidedVocab = 64;
inline constexpr int32_t kGuidedEnd = 0;

// Token 0 ends sequences (no text); 1-10 are digits, 11-36 letters, then punctuation and a few multi-byte pieces;
// the last two are special (no text).
inline std::vector<std::string> guided_vocabulary() {
  std::vector<std::string> v{""};
  for (char c = '0'; c <= '9'; ++c) v.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string(1, c));
  for (const char* s : {"{", "}", "\"", ":", ",", " ", "[", "]", "-", ".", "ab", "12", "\": ", "\", \"", "true",
                        "false", "null", "az", "9z", "{\"", "\"}", "x\"", "é"})
    v.push_back(s);
  while (v.size() < static_cast<size_t>(kGuidedVocab)) v.push_back("");
  return v;
}

inline engine::ExecutorConfig::GuidedDecodingConfig guided_config() {
  engine::ExecutorConfig::GuidedDecodingConfig g;
  g.encoded_vocab = guided_vocabulary();
  return g;
}

inline std::string guided_text(const std::vector<int32_t>& ids) {
  const auto v = guided_vocabulary();
  std::string s;
  for (int32_t id : ids) s += v[static_cast<size_t>(id)];
  return s;
}

inline engine::Request guided_request(std::vector<int32_t> prompt, int32_t max_tokens, engine::GuideType type,
                                      std::string guide, bool streaming = false) {
  engine::Request r = make_request(std::move(prompt), max_tokens, streaming);
  r.end_id = kGuidedEnd;
  r.output.exclude_input_from_output = true;
  r.guided_decoding = engine::GuidedDecodingParams{type, std::move(guide)};
  return r;
}

}  // namespace test
