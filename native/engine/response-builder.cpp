#include "response-builder.h"

namespace engine {

bool has_unsent_output(const Sequence& seq) {
  return seq.sent_tokens < static_cast<size_t>(seq.num_generated());
}

Response build_response(Sequence& seq, int32_t vocab, bool is_final) {
  Response resp;
  resp.request_id = seq.id;
  resp.client_id = seq.request.client_id;
  Result& r = resp.result;
  r.is_final = is_final;
  r.vocab_size = vocab;
  r.finish_reasons = {is_final ? seq.finish_reason : FinishReason::not_finished};
  r.arrival_time = seq.arrival_time;
  r.first_scheduled_time = seq.first_scheduled_time;
  r.first_token_time = seq.first_token_time;
  r.last_token_time = seq.last_token_time;

  const OutputConfig& oc = seq.request.output;
  const size_t generated = static_cast<size_t>(seq.num_generated());
  const size_t from = seq.request.streaming ? seq.sent_tokens : 0;

  TokenIds out;
  if (!seq.request.streaming && !oc.exclude_input_from_output) {
    out.assign(seq.tokens.begin(), seq.tokens.end());
  } else {
    out.assign(seq.tokens.begin() + seq.prompt_len + static_cast<std::ptrdiff_t>(from), seq.tokens.end());
  }
  r.output_token_ids = {std::move(out)};

  if (oc.return_log_probs) {
    r.log_probs = {std::vector<float>(seq.log_probs.begin() + static_cast<std::ptrdiff_t>(from), seq.log_probs.end())};
    r.cum_log_probs = {static_cast<float>(seq.cum_log_prob)};
  }
  if (oc.return_context_logits && !seq.sent_context_logits) {
    r.context_logits = seq.context_logits;
    if (seq.request.streaming) seq.sent_context_logits = true;
  }
  if (oc.return_generation_logits) {
    const size_t row_from = seq.request.streaming ? seq.sent_generation_rows : 0;
    r.generation_logits.assign(seq.generation_logits.begin() + static_cast<std::ptrdiff_t>(row_from * vocab),
                               seq.generation_logits.end());
    seq.sent_generation_rows = seq.generation_logits.size() / static_cast<size_t>(vocab > 0 ? vocab : 1);
  }
  seq.sent_tokens = generated;
  return resp;
}

Response build_error_response(const Sequence& seq, ErrorCode code, const std::string& message) {
  Response resp;
  resp.request_id = seq.id;
  resp.client_id = seq.request.client_id;
  resp.has_error = true;
  resp.error_code = code;
  resp.error_message = message;
  resp.result.is_final = true;
  return resp;
}

}  // namespace engine
