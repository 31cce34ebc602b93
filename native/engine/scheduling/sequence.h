// Per-request state owned by the executor loop thread: the request, its tokens, where it stands in its life
// cycle, its KV block table and everything the responses need (log probs, logits, timings, streaming cursor).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/grammar-matcher.h"
#include "kv-cache/kv-block-hash.h"
#include "kv-cache/kv-cache.h"
#include "lora/lora-cache.h"
#include "sampling/beam.h"
#include "scheduling/request.h"

namespace engine {

enum class SequenceState {
  queued,      // accepted, never scheduled
  context,     // running: K/V of some of its tokens still to be computed (prompt, or prompt+generated on resume)
  generation,  // running: one new token per iteration
  paused,      // evicted by max_utilization: blocks freed, waiting at the front of the queue to be recomputed
  finished,    // final response emitted (or about to be, this iteration)
};

struct Sequence {
  RequestId id = 0;
  Request request;
  // Prompt followed by every generated token that is part of the output (an end_id token is not appended).
  TokenIds tokens;
  int32_t prompt_len = 0;
  SequenceState state = SequenceState::queued;
  FinishReason finish_reason = FinishReason::not_finished;

  // Positions [0, num_computed) have K/V in the blocks of block_table. After a pause this drops to 0 and the
  // next context chunk recomputes prompt + generated tokens; the sampler step counter (num_generated()) is not
  // affected, so a resumed request draws the same random numbers it would have drawn unpaused.
  int32_t num_computed = 0;
  BlockTable block_table;
  // Speculation by draft model: positions [0, draft_computed) have K/V in the draft model's blocks draft_blocks.
  int32_t draft_computed = 0;
  BlockTable draft_blocks;
  // EAGLE heads: the draft reads positions from draft_base on (its own position 0), and the model's features of
  // positions [draft_base + draft_computed, num_computed) are what it has yet to read, [rows, width]
  // (executor-draft-model.cpp). draft_base is where the sequence's computed positions began: a prefix it found in the
  // cache has no features here, so the draft starts after it.
  int32_t draft_base = 0;
  std::vector<float> eagle_features;
  // Speculation by Medusa heads: their guesses for the tokens after the last one, from the row that drew it; they
  // stand only while num_tokens() == head_guesses_for (a token dropped or added since makes them stale).
  std::vector<int32_t> head_guesses;
  int32_t head_guesses_for = -1;
  // max_attention_window_size for this sequence (the request's under the server's; 0: none), sent with each chunk,
  // and the window every layer stays within with it (model-config.h's kv_release_window; 0: some layer sees
  // everything, or beam search): blocks before it are released after each forward (kv-window.h).
  int32_t window_cap = 0;
  int32_t release_window = 0;
  // Order in which sequences (re)entered the running set; max_utilization pauses the highest first (LIFO).
  uint64_t start_order = 0;
  bool ever_scheduled = false;
  // Pipelined pp: in a micro-batch that has begun and not yet come back (executor-pipeline.cpp). Such a sequence
  // gets no new work, and outlives its own cancel until its micro-batch ends.
  bool in_flight = false;
  // LoRA: the adapter it runs with, held from enqueue to its end (key 0: the base model). Its KV blocks' prefix
  // chain starts from kv_root(): the same tokens have other K/V under another adapter.
  CachedLora lora;

  // Guided decoding: where the output stands in the request's grammar (null: unconstrained). budget_redraw: the
  // device drew a token after which the guide cannot be completed within max_tokens, and the model could not give
  // its row back (Model::sampled_row); that step is computed again and its token drawn on the host, where the mask
  // is narrowed to the tokens that fit (executor-sample.cpp).
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  bool budget_redraw = false;

  // Outputs, per generated token (beam 0 only until beam search lands).
  std::vector<float> log_probs;
  double cum_log_prob = 0;
  std::vector<float> context_logits;     // [rows_done, vocab]; rows appended as prompt chunks run
  std::vector<float> generation_logits;  // [num_generated, vocab]

  // Beam search only (request.sampling.beam_width > 1; beam-search.h). The context runs once on `tokens` and
  // `block_table` above; the first step moves those blocks into the beams. After that `tokens` mirrors the best
  // live beam (so the scheduler and the step counter see the request's length) and `block_table` stays empty.
  std::vector<Beam> beams;                 // live, best first
  std::vector<BeamHypothesis> hypotheses;  // finished, best first, at most beam_width
  std::vector<float> beam_logits;          // [rows, vocab] generation logits rows the beams index into

  // Streaming cursors: how much of each output was already sent.
  size_t sent_tokens = 0;          // generated tokens
  size_t sent_generation_rows = 0;
  bool sent_context_logits = false;

  // Seconds since the executor's epoch.
  double arrival_time = 0, first_scheduled_time = 0, first_token_time = 0, last_token_time = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return num_tokens() - prompt_len; }
  int32_t context_logits_rows(int32_t vocab) const {
    return vocab > 0 ? static_cast<int32_t>(context_logits.size() / static_cast<size_t>(vocab)) : 0;
  }
  // Tokens whose K/V a lifetime can need: the last generated token is never fed back, but TRT-LLM (and our
  // admission/validation) count prompt + max_tokens, which keeps the three consistent.
  int64_t lifetime_tokens() const { return static_cast<int64_t>(prompt_len) + request.max_tokens; }
  // The root its KV blocks' prefix chain starts from: the same tokens have other K/V under another LoRA adapter or
  // another p-tuning table (virtual tokens embed from it), so each has chains of its own.
  uint64_t kv_root() const { return kv_block_root(lora.key, request.prompt_table ? request.prompt_table->key : 0); }
  bool is_finished() const { return state == SequenceState::finished; }
  bool is_beam_search() const { return request.sampling.beam_width > 1; }
};

}  // namespace engine
