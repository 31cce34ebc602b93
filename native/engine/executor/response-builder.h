// Turns a sequence's state into a Response, with TensorRT-LLM's streaming/non-streaming semantics:
//   streaming: each response carries only what is new since the previous one (tokens, log probs, generation
//     logits); context logits go out once, in the first response that can carry them.
//   not streaming: one final response with the whole output — the prompt in front unless
//     exclude_input_from_output — and every log prob / logits row.
// Advances the sequence's streaming cursors, hence the non-const Sequence.
#pragma once
#include <string>

#include "scheduling/request.h"
#include "scheduling/sequence.h"

namespace engine {

// Beam-search sequences get one entry per returned beam (num_return_sequences, best first) in every per-beam
// field; see build_beam_response in response-builder.cpp for what streaming carries then.
Response build_response(Sequence& seq, int32_t vocab_size, bool is_final);
Response build_error_response(const Sequence& seq, ErrorCode code, const std::string& message);

// True when a streaming sequence has something not yet sent (a token, or its context logits).
bool has_unsent_output(const Sequence& seq);

}  // namespace engine
