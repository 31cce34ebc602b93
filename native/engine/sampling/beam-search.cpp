#include "sampling/beam-search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "sampling/stop-words.h"

namespace engine {
namespace {

double length_penalized(double cum, int64_t length, float length_penalty) {
  return cum / std::pow(static_cast<double>(std::max<int64_t>(1, length)), static_cast<double>(length_penalty));
}

// Keeps the `width` best hypotheses, best first (HF's BeamHypotheses: a newcomer must beat the worst once full).
void add_hypothesis(std::vector<BeamHypothesis>& hyps, BeamHypothesis&& h, size_t width) {
  if (hyps.size() >= width && !(h.score > hyps.back().score)) return;
  // Stable: among equal scores the earlier hypothesis stays first.
  auto at = std::upper_bound(hyps.begin(), hyps.end(), h.score,
                             [](double s, const BeamHypothesis& x) { return s > x.score; });
  hyps.insert(at, std::move(h));
  if (hyps.size() > width) hyps.pop_back();
}

// A finished beam as a hypothesis of `length` generated tokens (end_id counted, as HF does).
BeamHypothesis hypothesis_of(Beam&& b, int32_t prompt_len, int64_t length, float length_penalty, FinishReason reason) {
  BeamHypothesis h;
  h.output.assign(b.tokens.begin() + prompt_len, b.tokens.end());
  h.cum_log_prob = b.cum_log_prob;
  h.score = length_penalized(b.cum_log_prob, length, length_penalty);
  h.log_probs = std::move(b.log_probs);
  h.logits_rows = std::move(b.logits_rows);
  h.reason = reason;
  return h;
}

}  // namespace

int32_t beam_blocks_held(const Sequence& seq) {
  if (seq.beams.empty()) return static_cast<int32_t>(seq.block_table.size());
  std::set<int32_t> ids;
  for (const Beam& b : seq.beams) ids.insert(b.block_table.begin(), b.block_table.end());
  return static_cast<int32_t>(ids.size());
}

bool BeamSearch::step(Sequence& seq, const std::vector<const float*>& rows, int32_t vocab, Sampler& sampler,
                      KvCacheManager& kv) {
  if (seq.beams.empty()) {  // the fork: the context becomes the one parent beam, its blocks move over
    Beam root;
    root.tokens = seq.tokens;
    root.block_table = std::move(seq.block_table);
    seq.block_table.clear();
    seq.beams.push_back(std::move(root));
  }
  const size_t live = std::min(seq.beams.size(), rows.size());
  const int32_t generated = static_cast<int32_t>(seq.beams[0].tokens.size()) - seq.prompt_len;

  // Rows of this step's generation logits, one per live beam.
  int32_t first_row = -1;
  if (seq.request.output.return_generation_logits) {
    first_row = static_cast<int32_t>(seq.beam_logits.size() / static_cast<size_t>(vocab));
    for (size_t b = 0; b < live; ++b) seq.beam_logits.insert(seq.beam_logits.end(), rows[b], rows[b] + vocab);
  }
  collect_candidates(seq, rows, live, vocab, generated, sampler);
  std::vector<Beam> next = extend(seq, generated, first_row, kv);
  for (Beam& b : seq.beams) kv.release(b.block_table);
  seq.beams = std::move(next);
  if (!finished(seq, generated + 1)) {
    seq.tokens = seq.beams.front().tokens;
    return false;
  }
  for (Beam& b : seq.beams) kv.release(b.block_table);
  seq.beams.clear();
  seq.tokens.resize(static_cast<size_t>(seq.prompt_len));
  if (!seq.hypotheses.empty()) {
    const BeamHypothesis& best = seq.hypotheses.front();
    seq.tokens.insert(seq.tokens.end(), best.output.begin(), best.output.end());
    seq.finish_reason = best.reason;
  } else {
    seq.finish_reason = FinishReason::length;  // every continuation banned: nothing to return
  }
  return true;
}

void BeamSearch::collect_candidates(const Sequence& seq, const std::vector<const float*>& rows, size_t live,
                                    int32_t vocab, int32_t generated, Sampler& sampler) {
  const Request& req = seq.request;
  const SamplingConfig& cfg = req.sampling;
  const size_t width = static_cast<size_t>(cfg.beam_width);
  // Per beam only its 2 * width best tokens can reach the global 2 * width.
  const size_t per_beam = std::min(static_cast<size_t>(vocab), 2 * width);
  candidates_.clear();
  for (size_t b = 0; b < live; ++b) {
    const Beam& beam = seq.beams[b];
    SamplingContext ctx;
    ctx.config = &cfg;
    ctx.step = static_cast<uint64_t>(generated);
    ctx.tokens = &beam.tokens;
    ctx.prompt_len = seq.prompt_len;
    ctx.end_id = req.end_id;
    ctx.bad_words = &req.bad_words;
    ctx.embedding_bias = &req.embedding_bias;
    sampler.processed_log_probs(rows[b], vocab, ctx, lp_);
    top_.resize(static_cast<size_t>(vocab));
    for (int32_t t = 0; t < vocab; ++t) top_[t] = {lp_[t], t};
    std::partial_sort(top_.begin(), top_.begin() + static_cast<std::ptrdiff_t>(per_beam), top_.end(),
                      [](const std::pair<float, int32_t>& x, const std::pair<float, int32_t>& y) {
                        return x.first != y.first ? x.first > y.first : x.second < y.second;
                      });
    for (size_t k = 0; k < per_beam; ++k) {
      const float lp = top_[k].first;
      if (lp == -std::numeric_limits<float>::infinity()) break;  // banned: never a continuation
      const double cum = beam.cum_log_prob + lp;
      candidates_.push_back({cum - static_cast<double>(cfg.beam_search_diversity_rate) * static_cast<double>(k), cum,
                             lp, static_cast<int32_t>(b), top_[k].second});
    }
  }
  // Best first; ties go to the lower beam, then the lower token (deterministic).
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const Candidate& x, const Candidate& y) {
    if (x.rank_score != y.rank_score) return x.rank_score > y.rank_score;
    if (x.beam != y.beam) return x.beam < y.beam;
    return x.token < y.token;
  });
  if (candidates_.size() > 2 * width) candidates_.resize(2 * width);
}

std::vector<Beam> BeamSearch::extend(Sequence& seq, int32_t generated, int32_t first_row, KvCacheManager& kv) {
  const Request& req = seq.request;
  const size_t width = static_cast<size_t>(req.sampling.beam_width);
  const float length_penalty = req.sampling.length_penalty;
  // At max_tokens every candidate finishes, and HF lets only the top beam_width of them become hypotheses.
  const bool last_step = generated + 1 >= req.max_tokens;
  std::vector<Beam> next;
  for (size_t rank = 0; rank < candidates_.size() && next.size() < width; ++rank) {
    const Candidate& c = candidates_[rank];
    const bool may_finish = rank < width;  // HF: only the top beam_width candidates may end a hypothesis
    if (last_step && !may_finish) break;
    const Beam& parent = seq.beams[static_cast<size_t>(c.beam)];
    Beam child;
    child.tokens = parent.tokens;
    child.cum_log_prob = c.cum;
    child.log_probs = parent.log_probs;
    child.logits_rows = parent.logits_rows;
    if (first_row >= 0) child.logits_rows.push_back(first_row + c.beam);
    if (req.end_id >= 0 && c.token == req.end_id) {
      // TRT-LLM does not return end_id; its log prob still counts in the score and the length, as in HF.
      if (may_finish) {
        if (first_row >= 0) child.logits_rows.pop_back();
        add_hypothesis(
            seq.hypotheses,
            hypothesis_of(std::move(child), seq.prompt_len, generated + 1, length_penalty, FinishReason::end_id), width);
      }
      continue;
    }
    child.tokens.push_back(c.token);
    child.log_probs.push_back(c.log_prob);
    if (!req.stop_words.empty() && ends_with_stop_word(child.tokens, seq.prompt_len, req.stop_words)) {
      if (may_finish)
        add_hypothesis(seq.hypotheses,
                       hypothesis_of(std::move(child), seq.prompt_len, generated + 1, length_penalty,
                                     FinishReason::stop_words),
                       width);
      continue;
    }
    child.block_table = parent.block_table;
    kv.share(child.block_table);  // every reference taken before any old one is dropped: nothing is freed early
    next.push_back(std::move(child));
  }
  return next;
}

bool BeamSearch::finished(Sequence& seq, int32_t now_generated) {
  const Request& req = seq.request;
  const SamplingConfig& cfg = req.sampling;
  const size_t width = static_cast<size_t>(cfg.beam_width);
  if (seq.beams.empty()) return true;
  if (now_generated >= req.max_tokens) {
    for (Beam& b : seq.beams)
      add_hypothesis(
          seq.hypotheses,
          hypothesis_of(std::move(b), seq.prompt_len, now_generated, cfg.length_penalty, FinishReason::length), width);
    return true;
  }
  if (seq.hypotheses.size() < width) return false;
  if (cfg.early_stopping == 1) return true;
  double best = -std::numeric_limits<double>::infinity();
  for (const Beam& b : seq.beams) best = std::max(best, b.cum_log_prob);
  const int64_t length = (cfg.early_stopping != 0 && cfg.length_penalty > 0) ? req.max_tokens : now_generated;
  return seq.hypotheses.back().score >= length_penalized(best, length, cfg.length_penalty);
}

}  // namespace engine
