// Request validation at enqueue time. Every failure is EngineError(invalid_argument) whose message names the
// field, the value received and the limit, so the caller can fix the request without reading engine code.
#pragma once
#include <cstdint>

#include "scheduling/request.h"

namespace engine {

// The limits a request is checked against; filled by the executor from its config, the model and the KV pool.
struct ValidationLimits {
  int32_t vocab_size = 0;
  int32_t max_seq_len = 0;                // prompt + max_tokens
  int32_t max_num_tokens = 0;             // tokens per iteration (bounds a prompt without chunked context)
  int32_t max_beam_width = 1;
  bool enable_chunked_context = false;
  int32_t kv_num_blocks = 0;              // the whole pool
  int32_t kv_tokens_per_block = 1;
  int64_t max_logits_elements = 0;       // context / generation logits values per request; 0: no cap
};

void validate_request(const Request& request, const ValidationLimits& limits);

}  // namespace engine
