// Prompt lookup, the draft of n-gram speculative decoding: the tokens that followed the latest earlier occurrence
// of the sequence's last n tokens (the longest n up to max_ngram that occurs) are guessed to come next. Text that
// quotes or edits its prompt, code, and structured output repeat themselves, so the guesses often hold, and a
// guess costs no model at all. Pure.
#pragma once
#include <cstdint>
#include <vector>

namespace engine {

// Up to max_draft tokens (none when no suffix of 1..max_ngram tokens occurred before).
std::vector<int32_t> ngram_draft(const std::vector<int32_t>& tokens, int32_t max_ngram, int32_t max_draft);

}  // namespace engine
