#include "executor/response-builder.h"

#include <algorithm>

namespace engine {

bool has_unsent_output(const Sequence& seq) {
  return seq.sent_tokens < static_cast<size_t>(seq.num_generated());
}

namespace {

// Beam search. Final: the best hypotheses. Streaming, not final: the best live beams, each as its WHOLE output so
// far (prompt excluded), not a delta, because beams are re-ranked and replaced every step, so a delta against the
// previous response would not be defined (TRT-LLM also returns whole beams when streaming with beam_width > 1).
// The final streaming response carries the whole hypotheses the same way. generation_logits: [beam, n, vocab]
// with n the longest returned beam; shorter beams are zero-padded.
Response build_beam_response(Sequence& seq, int32_t vocab, bool is_final) {
  Response resp;
  resp.request_id = seq.id;
  resp.client_id = seq.request.client_id;
  Result& r = resp.result;
  r.is_final = is_final;
  r.vocab_size = vocab;
  r.arrival_time = seq.arrival_time;
  r.first_scheduled_time = seq.first_scheduled_time;
  r.first_token_time = seq.first_token_time;
  r.last_token_time = seq.last_token_time;
  const OutputConfig& oc = seq.request.output;
  const int32_t width = seq.request.sampling.beam_width;
  const size_t wanted = static_cast<size_t>(seq.request.num_return_sequences > 0 ? seq.request.num_return_sequences : width);
  const bool with_prompt = !seq.request.streaming && !oc.exclude_input_from_output;

  struct View { TokenIds output; double cum; const std::vector<float>* log_probs; const std::vector<int32_t>* rows; FinishReason reason; };
  std::vector<View> views;
  // A request cancelled before any beam finished returns its live beams with the final reason.
  if (is_final && !seq.hypotheses.empty()) {
    for (const BeamHypothesis& h : seq.hypotheses) {
      if (views.size() == wanted) break;
      views.push_back({h.output, h.cum_log_prob, &h.log_probs, &h.logits_rows, h.reason});
    }
  } else {
    for (const Beam& b : seq.beams) {
      if (views.size() == wanted) break;
      views.push_back({TokenIds(b.tokens.begin() + seq.prompt_len, b.tokens.end()), b.cum_log_prob, &b.log_probs,
                       &b.logits_rows, is_final ? seq.finish_reason : FinishReason::not_finished});
    }
  }
  size_t longest = 0;
  for (View& v : views) {
    longest = std::max(longest, v.output.size());
    TokenIds out;
    if (with_prompt) out.assign(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_len);
    out.insert(out.end(), v.output.begin(), v.output.end());
    r.output_token_ids.push_back(std::move(out));
    r.finish_reasons.push_back(v.reason);
    if (oc.return_log_probs) {
      r.cum_log_probs.push_back(static_cast<float>(v.cum));
      r.log_probs.push_back(*v.log_probs);
    }
  }
  if (oc.return_context_logits && !seq.sent_context_logits) {
    r.context_logits = seq.context_logits;
    if (seq.request.streaming) seq.sent_context_logits = true;
  }
  if (oc.return_generation_logits && vocab > 0) {
    const size_t V = static_cast<size_t>(vocab);
    r.generation_logits.assign(views.size() * longest * V, 0.0f);
    for (size_t b = 0; b < views.size(); ++b)
      for (size_t i = 0; i < views[b].rows->size() && i < longest; ++i) {
        const size_t row = static_cast<size_t>((*views[b].rows)[i]);
        std::copy(seq.beam_logits.begin() + static_cast<std::ptrdiff_t>(row * V),
                  seq.beam_logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * V),
                  r.generation_logits.begin() + static_cast<std::ptrdiff_t>((b * longest + i) * V));
      }
  }
  seq.sent_tokens = static_cast<size_t>(seq.num_generated());
  return resp;
}

}  // namespace

Response build_response(Sequence& seq, int32_t vocab, bool is_final) {
  Response resp;
  if (seq.is_beam_search()) return build_beam_response(seq, vocab, is_final);
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
