// The per-beam state of a beam-search request (beam_width > 1): its live beams and its finished hypotheses.
// Kept apart from sequence.h so the beam-search step (beam-search.h) and the response builder share one definition.
#pragma once
#include <cstdint>
#include <vector>

#include "kv-cache/kv-cache.h"
#include "scheduling/request.h"

namespace engine {

// One live beam. Every live beam of a request has the same length (a finished one leaves for the hypotheses).
struct Beam {
  TokenIds tokens;                   // prompt + generated
  BlockTable block_table;            // shares the blocks it has in common with other beams (copy-on-write)
  double cum_log_prob = 0;           // sum of log_probs (the processed distribution's, see sampler.h)
  std::vector<float> log_probs;      // per generated token
  // Per generated token: the row of Sequence::beam_logits holding the logits it was chosen from. Rows are shared
  // by the beams descending from one parent, so re-ranking beams copies indices, never [vocab] rows.
  std::vector<int32_t> logits_rows;
};

// A finished beam, ranked by score = cum_log_prob / length ^ length_penalty (HF and TRT-LLM), where length counts
// the generated tokens including the one that finished it (an end_id token is counted but not returned, like
// HF's `cur_len + 1 - prompt_len`).
struct BeamHypothesis {
  TokenIds output;                   // generated tokens (end_id excluded, stop words included)
  double cum_log_prob = 0;           // includes the finishing token's log prob, as the score does
  double score = 0;
  std::vector<float> log_probs;      // one per returned token
  std::vector<int32_t> logits_rows;  // one per returned token
  FinishReason reason = FinishReason::length;
};

}  // namespace engine
