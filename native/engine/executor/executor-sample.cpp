// The sampling step of an iteration: each sequence of the batch takes what the forward pass gave it — context
// logits rows it keeps, the token drawn after a chunk that completed its tokens (by the sampler from the row, or
// by the model on its device, as the chunk's SampleOn says), or a beam step over its beams' rows — and then
// finishes (end_id, stop words, length) or streams.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <omp.h>

#include "executor/executor-impl.h"
#include "kv-cache/kv-block-hash.h"
#include "executor/response-builder.h"
#include "sampling/guided-masks.h"
#include "sampling/likeliest-allowed.h"
#include "kv-cache/kv-window.h"
#include "sampling/sampling-context.h"
#include "sampling/stop-words.h"

namespace engine {
namespace {

// The tokens a guided sequence may draw next; false when there are none.
bool guided_mask(Sequence& s, std::vector<uint64_t>& mask) {
  s.matcher->fill_mask(mask);
  for (uint64_t w : mask)
    if (w != 0) return true;
  return false;
}

std::string no_token_message(const Sequence& s) {
  return "guided decoding: no token of the vocabulary can continue the output here (after " +
         std::to_string(s.num_generated()) + " tokens); the guide needs characters this tokenizer cannot produce";
}

// The tokens that may follow this one: the output must be complete by then, with room left for end_id, so it ends
// complete (end_id) rather than cut (length) — clients refuse to parse a cut answer.
int64_t guided_budget(const Sequence& s) {
  return static_cast<int64_t>(s.request.max_tokens) - s.num_generated() - 1 - (s.request.end_id >= 0 ? 1 : 0);
}

// The guide's narrowing near max_tokens checks these: the allowed tokens the row scores highest (the budget
// check's candidates; grammar-matcher.h's restrict_to_budget adds the shortest completion's own tokens).
constexpr size_t kBudgetCandidates = 256;

// Calls f(id) for every id below vocab set in `mask` (bit id & 63 of word id >> 6), in ascending order, a set bit at
// a time: a narrowed mask has a few hundred of 128k.
template <typename F>
void for_each_allowed(const std::vector<uint64_t>& mask, int32_t vocab, F f) {
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const int32_t id = static_cast<int32_t>(w * 64) + __builtin_ctzll(bits);
      if (id >= vocab) return;
      f(id);
    }
}

}  // namespace

void Executor::Impl::sample_and_update(const IterationBatch& batch, const ForwardOutput& fo,
                                       std::vector<Response>& out) {
  const double t_tok = now();
  const size_t V = static_cast<size_t>(vocab_size);
  const auto t_check = IterationPhases::Clock::now();
  check_device_guided(batch, fo);
  phases.add(IterPhase::guided_check, t_check);
  // Rows the host samples under a guide (the CPU backend): their masks' new positions first, on all threads.
  std::vector<Sequence*> host_guided;
  for (size_t i = 0; i < batch.seqs.size() && i < fo.first_row.size(); ++i)
    if (batch.seqs[i]->matcher && fo.first_row[i] >= 0 && !batch.seqs[i]->is_finished()) host_guided.push_back(batch.seqs[i]);
  if (host_guided.size() > 1) precompute_guided_positions(host_guided);
  logit_first.resize(batch.chunks.size());
  for (size_t i = 0, r = 0; i < batch.chunks.size(); ++i) {
    logit_first[i] = r;
    r += batch.chunks[i].all_logits ? batch.chunks[i].tokens.size() : 1;
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence& s = *batch.seqs[i];
    if (s.is_finished()) continue;
    if (!s.beams.empty()) {  // its live beams' chunks are consecutive: one beam step over all their rows
      std::vector<const float*> rows;
      for (size_t k = 0; k < s.beams.size(); ++k)
        rows.push_back(fo.logits.data() + static_cast<size_t>(fo.first_row[i + k]) * V);
      i += s.beams.size() - 1;
      s.num_computed += 1;
      run_beam_step(s, rows, t_tok, out);
      continue;
    }
    eagle_rows.clear();  // (set by a check, verify_drafts)
    advance_sequence(s, batch, i, fo, t_tok, out);
    if (eagle) keep_eagle_features(s, batch.chunks[i], logit_first[i]);
  }
  run_heads();
}

void Executor::Impl::check_device_guided(const IterationBatch& batch, const ForwardOutput& fo) {
  const size_t n = batch.seqs.size();
  guided_fits.assign(n, -1);
  guided_accepted.assign(n, -1);
  std::vector<size_t> rows;
  for (size_t i = 0; i < n && i < fo.first_row.size(); ++i) {
    const Sequence& s = *batch.seqs[i];
    const bool no_token = i < guided_no_token.size() && guided_no_token[i];
    if (!s.is_finished() && s.matcher && s.beams.empty() && fo.first_row[i] < 0 && !no_token) rows.push_back(i);
  }
  const int count = static_cast<int>(rows.size());
  // A row is 10-20 us of walking at 128k tokens (its token's bytes; near max_tokens the budget's check) while the
  // device waits: one row at a time over every thread.
  const int nthreads = std::max(1, std::min(count, omp_get_max_threads()));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (count > 1)
  for (int k = 0; k < count; ++k) {
    const size_t i = rows[static_cast<size_t>(k)];
    Sequence& s = *batch.seqs[i];
    const int32_t token = fo.sampled[i].token;
    const auto t_row = IterationPhases::Clock::now();
    try {
      const bool fits = s.matcher->fits_budget(token, guided_budget(s));
      guided_fits[i] = fits ? 1 : 0;
      if (fits && token != s.request.end_id) guided_accepted[i] = s.matcher->accept_token(token) ? 1 : 0;
    } catch (...) {  // (out of memory) left to advance_sequence, which does it again and reports what fails
    }
    phases.add_row_work(t_row);
  }
}

void Executor::Impl::advance_sequence(Sequence& s, const IterationBatch& batch, size_t i, const ForwardOutput& fo,
                                      double t_tok, std::vector<Response>& out) {
  const size_t V = static_cast<size_t>(vocab_size);
  if (i < batch.drafts.size() && batch.drafts[i] > 0) {  // a decode step with guessed tokens (speculation)
    verify_drafts(s, batch, i, fo, t_tok, out);
    return;
  }
  const SequenceChunk& c = batch.chunks[i];
  const bool on_device = fo.first_row[i] < 0;
  const size_t first = on_device ? 0 : static_cast<size_t>(fo.first_row[i]);
  // The device draws from the guide's mask alone; near max_tokens its token may leave the guide unfinishable in
  // the tokens left. Then the token is drawn again on the host from the row the device drew it from, with the mask
  // narrowed to what fits; where the model cannot give that row, this chunk's last token is computed again next
  // iteration (its K/V slot is simply rewritten; nothing was committed or sent) and drawn on the host.
  std::optional<SampledToken> redrawn;
  const bool guided_on_device = on_device && s.matcher;
  if (guided_on_device && i < guided_no_token.size() && guided_no_token[i]) {
    fail_sequence(s, ErrorCode::invalid_argument, no_token_message(s), out);
    return;
  }
  if (guided_on_device && !(guided_fits[i] >= 0 ? guided_fits[i] == 1 : s.matcher->fits_budget(fo.sampled[i].token, guided_budget(s)))) {
    const auto t_redraw = IterationPhases::Clock::now();
    phases.count_redraw();
    const bool copied = model->sampled_row(static_cast<int32_t>(i), row_scratch);
    phases.add(IterPhase::redraw_copy, t_redraw);
    if (copied) {
      redrawn = redraw_in_budget(s, row_scratch.data());
      phases.add(IterPhase::redraw, t_redraw);
    } else {
      s.num_computed += static_cast<int32_t>(c.tokens.size()) - 1;
      kv.commit_full_blocks(s.block_table, s.tokens, s.num_computed, s.kv_root());
      s.budget_redraw = true;
      return;
    }
  }
  if (batch.ctx_rows_from[i] < batch.ctx_rows_to[i]) {
    const size_t a = first + static_cast<size_t>(batch.ctx_rows_from[i] - c.past_len);
    const size_t b = first + static_cast<size_t>(batch.ctx_rows_to[i] - c.past_len);
    s.context_logits.insert(s.context_logits.end(), fo.logits.begin() + a * V, fo.logits.begin() + b * V);
  }
  s.num_computed += static_cast<int32_t>(c.tokens.size());
  kv.commit_full_blocks(s.block_table, s.tokens, s.num_computed, s.kv_root());  // prefix reuse: newly full blocks
  // Sliding window: the blocks no later token reads go back to the pool (after the commit, so cached ones stay).
  if (s.release_window > 0)
    kv.release_front(s.block_table, kv_first_kept_block(s.num_computed, s.release_window, kv.tokens_per_block()));
  if (s.num_computed < s.num_tokens()) return;  // a partial context chunk: nothing to sample yet

  s.state = SequenceState::generation;
  const size_t row = first + (c.all_logits ? c.tokens.size() - 1 : 0);
  const float* logits = on_device ? nullptr : fo.logits.data() + row * V;
  if (s.is_beam_search()) {  // the context's row: the fork into beams
    run_beam_step(s, {logits}, t_tok, out);
    return;
  }
  SampledToken tok;
  if (redrawn) {
    tok = *redrawn;
  } else if (on_device) {
    tok = SampledToken{fo.sampled[i].token, fo.sampled[i].log_prob};
  } else {
    SamplingContext sc = sampling_context(s);
    if (s.matcher) {
      if (!guided_mask(s, allowed_scratch)) {
        fail_sequence(s, ErrorCode::invalid_argument, no_token_message(s), out);
        return;
      }
      sc.allowed = &allowed_scratch;
    }
    s.budget_redraw = false;
    tok = sampler.sample(logits, vocab_size, sc);
    // Near max_tokens the drawn token must leave the guide completable; checking the one drawn costs one token's
    // walk, narrowing the mask a few hundred, so that happens only when the drawn one does not fit (then it is
    // drawn again from the narrowed mask).
    if (s.matcher && !s.matcher->fits_budget(tok.token, guided_budget(s))) {
      s.matcher->restrict_to_budget(allowed_scratch, guided_budget(s), likeliest_allowed(logits, vocab_size, allowed_scratch, kBudgetCandidates));
      tok = sampler.sample(logits, vocab_size, sc);
    }
  }
  emit_token(s, tok, logits, t_tok, out, on_device && !redrawn ? guided_accepted[i] : -1);
  keep_head_guesses(s, logit_first[i] + (c.all_logits ? c.tokens.size() - 1 : 0));
}

SamplingContext Executor::Impl::sampling_context(const Sequence& s) const {
  SamplingContext sc;
  sc.config = &s.request.sampling;
  sc.step = static_cast<uint64_t>(s.num_generated());
  sc.tokens = &s.tokens;
  sc.prompt_len = s.prompt_len;
  sc.end_id = s.request.end_id;
  sc.bad_words = &s.request.bad_words;
  sc.embedding_bias = &s.request.embedding_bias;
  return sc;
}

SampledToken Executor::Impl::redraw_in_budget(Sequence& s, const float* row) {
  // The row already has the penalties and (when sampling) the temperature: drawn again without them.
  SamplingConfig config = s.request.sampling;
  config.repetition_penalty = 1.0f;
  config.presence_penalty = config.frequency_penalty = 0.0f;
  if (!is_greedy(config)) config.temperature = 1.0f;
  SamplingContext sc;
  sc.config = &config;
  sc.step = static_cast<uint64_t>(s.num_generated());
  s.matcher->fill_mask(allowed_scratch);
  s.matcher->restrict_to_budget(allowed_scratch, guided_budget(s), likeliest_allowed(row, vocab_size, allowed_scratch, kBudgetCandidates));
  // Drawn among the narrowed tokens alone (a few hundred, in id order): the same draw as over the whole row with
  // only them allowed, whose other entries are -inf and add nothing to any sum.
  std::vector<int32_t> ids;
  std::vector<float> compact;
  for_each_allowed(allowed_scratch, vocab_size, [&](int32_t id) {
    ids.push_back(id);
    compact.push_back(row[id]);
  });
  SampledToken tok = sampler.sample(compact.data(), static_cast<int32_t>(compact.size()), sc);
  tok.token = ids[static_cast<size_t>(tok.token)];
  return tok;
}

void Executor::Impl::emit_token(Sequence& s, const SampledToken& tok, const float* logits, double t_tok,
                                std::vector<Response>& out, int8_t accepted) {
  if (s.first_token_time == 0) s.first_token_time = t_tok;
  s.last_token_time = t_tok;
  // TensorRT-LLM semantics: generation stops at end_id, which is not part of the output.
  if (s.request.end_id >= 0 && tok.token == s.request.end_id) {
    finish_sequence(s, FinishReason::end_id, out);
    return;
  }
  if (s.matcher && (accepted >= 0 ? accepted == 0 : !s.matcher->accept_token(tok.token))) {  // the mask allowed it: a bug
    fail_sequence(s, ErrorCode::internal,
                  "guided decoding: token " + std::to_string(tok.token) + " was sampled but the guide does not allow it",
                  out);
    return;
  }
  s.tokens.push_back(tok.token);
  if (s.request.output.return_log_probs) {
    s.log_probs.push_back(tok.log_prob);
    s.cum_log_prob += tok.log_prob;
  }
  // (A device-sampled token never has generation logits: the choice excludes them, so `logits` is set here.)
  if (s.request.output.return_generation_logits)
    s.generation_logits.insert(s.generation_logits.end(), logits, logits + static_cast<size_t>(vocab_size));
  if (!s.request.stop_words.empty() && ends_with_stop_word(s.tokens, s.prompt_len, s.request.stop_words)) {
    finish_sequence(s, FinishReason::stop_words, out);  // a stop word completed at max_tokens still counts
  } else if (s.matcher && s.matcher->must_end()) {  // complete, and nothing may follow: done without end_id
    finish_sequence(s, FinishReason::end_id, out);
  } else if (s.num_generated() >= s.request.max_tokens) {
    finish_sequence(s, FinishReason::length, out);
  } else if (s.request.streaming) {
    out.push_back(build_response(s, vocab_size, /*is_final=*/false));
  }
}

}  // namespace engine
