// Request validation at enqueue time. Every failure is EngineError(invalid_argument) whose message names the
// field, the value received and the limit, so the caller can fix the request without reading engine code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  // Sliding windows: a sequence whose every layer is windowed holds only its window's blocks (kv-window.h).
  std::vector<int32_t> layer_window;      // the model's (model-config.h); empty: none
  int32_t num_layers = 0;
  int32_t max_attention_window = 0;       // the server's cap; 0: none
  // P-tuning: the width a prompt table's rows must have, and whether the model takes tables at all
  // (Model::supports_prompt_tables; `prompt_table_refusal` says why not).
  int32_t hidden_size = 0;
  bool prompt_tables = false;
  std::string prompt_table_refusal;
};

void validate_request(const Request& request, const ValidationLimits& limits);

}  // namespace engine
