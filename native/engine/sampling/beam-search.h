// One step of beam search for one request, with Hugging Face's / TensorRT-LLM's algorithm:
//   every live beam's row -> logits processors -> log-softmax (sampler.h, processed_log_probs); each continuation
//   scores cum_log_prob + log_prob (minus beam_search_diversity_rate * its rank among its parent's continuations,
//   TRT-LLM's diverse decoding; the rank penalty only orders candidates, cum_log_prob stays the true sum);
//   the 2 * beam_width best candidates over all beams are walked best first: one ending in end_id or completing a
//   stop word becomes a finished hypothesis when it ranks within the first beam_width (HF's rule), the others
//   become the next live beams until beam_width of them exist.
//   Done when max_tokens is reached (live beams become hypotheses), or when beam_width hypotheses exist and
//   early_stopping says so: 1 -> at once; 0 -> when the best live beam's score at its current length cannot beat
//   the worst hypothesis; -1 -> the same bound but at max_tokens length when length_penalty > 0 (HF "never").
// The first step forks: the sequence's context (tokens, block_table) becomes the single parent beam, and its
// blocks pass to the children by reference (KvCacheManager::share), so the prompt's K/V exist once; a beam copies
// its partial last block only when it writes into it while a sibling still reads it (done by the executor before
// the forward pass, KvCacheManager::make_writable + Model::copy_kv_block).
#pragma once
#include <cstdint>
#include <vector>

#include "kv-cache/kv-cache.h"
#include "sampling/sampler.h"
#include "scheduling/sequence.h"

namespace engine {

class BeamSearch {
 public:
  // rows[b]: the logits row of live beam b (before the first step: one row, the context's last). Updates the
  // sequence's beams, hypotheses, tokens (the best live beam, or the best hypothesis once done) and KV tables.
  // Returns true when the request is finished: seq.finish_reason is then the best hypothesis' reason, the beams'
  // blocks are released and seq.hypotheses holds the results, best first.
  bool step(Sequence& seq, const std::vector<const float*>& rows, int32_t vocab, Sampler& sampler, KvCacheManager& kv);

 private:
  struct Candidate {
    double rank_score;   // what orders candidates (includes the diversity penalty)
    double cum;          // parent's cum_log_prob + log_prob
    float log_prob;
    int32_t beam, token;
  };
  // candidates_ = the 2 * beam_width best continuations over the live beams, best first.
  void collect_candidates(const Sequence& seq, const std::vector<const float*>& rows, size_t live, int32_t vocab,
                          int32_t generated, Sampler& sampler);
  // Walks candidates_: the next live beams (sharing their parents' blocks), finished ones into seq.hypotheses.
  // first_row: this step's first generation-logits row, or -1.
  std::vector<Beam> extend(Sequence& seq, int32_t generated, int32_t first_row, KvCacheManager& kv);
  // Whether the request is done after this step (at max_tokens the live beams become hypotheses first).
  bool finished(Sequence& seq, int32_t now_generated);

  std::vector<float> lp_;
  std::vector<std::pair<float, int32_t>> top_;
  std::vector<Candidate> candidates_;
};

// Blocks a beam-search request holds: distinct ids over its beams (or its context table before the fork).
int32_t beam_blocks_held(const Sequence& seq);

}  // namespace engine
