// Stop-word matching with TensorRT-LLM's semantics: a stop word is a token sequence; generation stops (finish
// reason `stop_words`) as soon as the GENERATED tokens end with one. Only generated tokens count (a prompt ending
// with a stop word must not stop the request before it produced anything), but a match may span several
// iterations and streaming responses, since the check reads the accumulated output, not the newest chunk.
// The stop sequence stays in the output, as TRT-LLM returns it (trimming it is left to the detokenizing caller).
#pragma once
#include <cstdint>
#include <vector>

#include "scheduling/request.h"

namespace engine {

// True when tokens[prompt_len ..) ends with one of `words` (each word entirely inside the generated part).
bool ends_with_stop_word(const TokenIds& tokens, int32_t prompt_len, const std::vector<TokenIds>& words);

}  // namespace engine
