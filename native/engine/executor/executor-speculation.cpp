// Speculative decoding by prompt lookup (ExecutorConfig::ngram_speculation): a request's decode chunk carries,
// after its next input token, tokens guessed from its own earlier text (sampling/ngram-draft.h); the pass returns
// a logits row for each, and the request keeps every guess the model's own draw agrees with, plus the model's draw
// at the first disagreement. Each row is sampled exactly as the plain step would sample it, so the output is the
// plain output; the guesses only save passes. For a sampled request this is rejection sampling with a drafter that
// puts all its mass on its guess x: keep x with probability p(x), else draw from p with x taken out — which is what
// one draw from p followed by "is it x?" does. The draw of step s is a function of (seed, s) alone (sampler.h), so
// the speculating request even draws the plain request's tokens. Rejected guesses' K/V slots lie past num_computed and
// are written again before anything reads them: nothing is copied or freed. The same check serves a draft model's
// and EAGLE heads' guesses (executor-draft-model.cpp) and Medusa heads' (medusa/): those come as a tree of candidates, fed in one
// pass (SequenceChunk::tree_parents), the walk following the model's draws from branch to branch.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "executor/executor-impl.h"
#include "kv-cache/kv-block-hash.h"
#include "medusa/medusa-tree.h"
#include "sampling/ngram-draft.h"

namespace engine {
namespace {

// Requests whose next tokens the check can stand for: one sequence, nothing that needs the plain step's own
// machinery (a guide, returned generation logits, windows whose blocks move).
bool can_speculate(const Sequence& s) {
  const Request& r = s.request;
  return s.state == SequenceState::generation && !s.is_beam_search() && !s.matcher &&
         !r.output.return_generation_logits && s.release_window == 0 && s.window_cap == 0;
}

// Whether the device can draw every row of this decode chunk once it carries guesses: its argmax, or a draw whose
// processing does not depend on the tokens before it in the chunk (no penalties; guided rows are not speculated).
bool rows_on_device(const SequenceChunk& c) {
  return c.sample_on == SampleOn::device_argmax ||
         (c.sample_on == SampleOn::device && c.device_sampling.penalty_tokens.empty() && !c.device_sampling.guided);
}

// On a model that samples on its device, a checked row it cannot draw (a request with penalties) comes back to the
// host whole, 4 bytes per vocabulary id (512 KB at 128k ids). Guesses that would bring back more than this in one
// iteration are not made: past a few requests the copies would cost more than the passes they save.
constexpr int64_t kHostCheckBytes = int64_t{16} << 20;

}  // namespace

void Executor::Impl::add_drafts(IterationBatch& b) {
  b.drafts.assign(b.chunks.size(), 0);
  accepted_drafts = 0;  // (counted by this iteration's verify_drafts)
  drafted_tokens = drafting_requests = 0;
  const ExecutorConfig::NgramSpeculation& spec = config.ngram_speculation;
  if (micro_batches > 1) return;
  if (config.speculation_max_batch > 0) {
    int32_t decoding = 0;
    for (const Sequence* s : b.seqs) decoding += s->state == SequenceState::generation ? 1 : 0;
    if (decoding > config.speculation_max_batch) return;
  }
  const int32_t default_room =
      draft_model || medusa_heads > 0 ? config.draft_model_tokens : spec.max_draft_tokens;
  // Guesses take what the iteration's token budget and the free blocks leave after the planned work.
  int64_t budget = scheduler_config.max_num_tokens;
  for (const SequenceChunk& c : b.chunks) budget -= static_cast<int64_t>(c.tokens.size());
  std::vector<DraftAsk> asks;
  std::vector<std::vector<int32_t>> guesses;
  std::vector<std::vector<int32_t>> trees;  // per ask: a tree's parents (empty: a chain of guesses)
  const int64_t row_bytes = static_cast<int64_t>(vocab_size) * 4;
  int64_t host_bytes_left = model->samples_on_device() ? kHostCheckBytes : INT64_MAX;
  for (size_t i = 0; i < b.chunks.size() && budget > 0; ++i) {
    Sequence& s = *b.seqs[i];
    const SequenceChunk& c = b.chunks[i];
    // A decode step's chunk: the last token; with Medusa heads or EAGLE trees also the tokens of a kept branch
    // computed again (verify_drafts) ending with it (Medusa: whose last row drew the heads' guesses too).
    const auto fed = static_cast<int64_t>(c.tokens.size());
    const bool catch_up = fed > 1 && (medusa_heads > 0 || eagle_trees);
    // (an EAGLE catch-up already has a row per token, for the features; rows asked as context logits are not checks)
    const bool context_rows = b.ctx_rows_from[i] < b.ctx_rows_to[i] || (c.all_logits && !(eagle && catch_up));
    if (!can_speculate(s) || (fed != 1 && !catch_up) || context_rows || c.past_len + fed != s.num_tokens()) continue;
    if (draft_model && s.request.prompt_table) continue;  // the draft model has no rows for the virtual tokens
    // Never past max_tokens: the last token a request may output is never fed back, so it needs no guess.
    const int32_t asked = s.request.num_draft_tokens >= 0 ? s.request.num_draft_tokens : default_room;
    const int64_t depth_left = static_cast<int64_t>(s.request.max_tokens) - s.num_generated() - 1;
    const bool rows_to_host = !rows_on_device(c) && host_bytes_left != INT64_MAX;
    const int64_t host_rows = rows_to_host ? host_bytes_left / row_bytes - 1 : INT64_MAX;
    int64_t room = std::min<int64_t>({asked, budget, depth_left, host_rows});
    TokenTree tree;
    if (medusa_heads > 0) {  // the heads' guesses from the pass that drew the last token
      if (s.head_guesses_for != s.num_tokens()) continue;
      // A tree may be wider than the tokens left; a chain (a model without trees) has one guess per head.
      const auto depth = static_cast<int32_t>(std::min<int64_t>(depth_left, medusa_heads));
      const auto nodes = static_cast<int32_t>(std::min<int64_t>({asked, budget, host_rows, kMaxTreeTokens - fed}));
      tree = build_token_tree(medusa_trees ? medusa_choices : chain_choices, s.head_guesses.data(), nodes, depth);
      room = static_cast<int64_t>(tree.tokens.size());
    }
    int64_t depth = room;
    if (eagle_trees) {  // as a Medusa tree: wider than the tokens left, as deep as they are
      depth = std::min<int64_t>(depth_left, kMaxTreeTokens);
      room = std::min<int64_t>({asked, budget, host_rows, kMaxTreeTokens - fed});
    }
    if (room <= 0 || depth <= 0) continue;
    if (rows_to_host) host_bytes_left -= (room + fed) * row_bytes;
    if (draft_model) {
      asks.push_back({i, static_cast<int32_t>(room), static_cast<int32_t>(depth)});
      budget -= room;
    } else if (medusa_heads > 0) {
      guesses.push_back(std::move(tree.tokens));
      trees.push_back(tree.is_chain() ? std::vector<int32_t>{} : std::move(tree.parents));
      asks.push_back({i, static_cast<int32_t>(room)});
      budget -= room;
    } else {
      guesses.push_back(ngram_draft(s.tokens, spec.max_ngram, static_cast<int32_t>(room)));
      trees.emplace_back();
      asks.push_back({i, static_cast<int32_t>(guesses.back().size())});
      budget -= static_cast<int64_t>(guesses.back().size());
    }
  }
  if (asks.empty()) return;
  if (draft_model) {
    try {
      for (TokenTree& t : draft_model_guesses(b, asks)) {
        trees.push_back(t.is_chain() ? std::vector<int32_t>{} : std::move(t.parents));
        guesses.push_back(std::move(t.tokens));
      }
    } catch (const std::exception& e) {
      // The plain step goes on without guesses; the draft starts over on the next one.
      std::fprintf(stderr, "[executor] draft model failed, this step runs without guesses: %s\n", e.what());
      for (const DraftAsk& a : asks) release_draft(*b.seqs[a.chunk]);
      return;
    }
  }
  for (size_t k = 0; k < asks.size(); ++k) {
    Sequence& s = *b.seqs[asks[k].chunk];
    SequenceChunk& c = b.chunks[asks[k].chunk];
    const std::vector<int32_t>& draft = guesses[k];
    const auto fed = static_cast<int32_t>(c.tokens.size());
    if (draft.empty() || !kv.ensure_capacity(s.block_table, c.past_len + fed + static_cast<int64_t>(draft.size())))
      continue;
    c.tokens.insert(c.tokens.end(), draft.begin(), draft.end());
    if (!trees[k].empty()) {
      // The tokens fed before the guesses are a chain (causal); the tree hangs from the last of them.
      c.tree_parents.resize(static_cast<size_t>(fed));
      for (int32_t t = 0; t < fed; ++t) c.tree_parents[static_cast<size_t>(t)] = t - 1;
      for (int32_t p : trees[k]) c.tree_parents.push_back(p + fed - 1);
    }
    c.block_ids = s.block_table;
    c.all_logits = true;  // a row per guess
    // Where choose_device_sampling let the device draw the plain step, it draws every row (argmaxes, or draws
    // without penalties); any other row is drawn here.
    if (!rows_on_device(c)) c.sample_on = SampleOn::host;
    b.drafts[asks[k].chunk] = static_cast<int32_t>(draft.size());
    drafted_tokens += static_cast<int64_t>(draft.size());
    ++drafting_requests;
  }
}

void Executor::Impl::verify_drafts(Sequence& s, const IterationBatch& batch, size_t i, const ForwardOutput& fo,
                                   double t_tok, std::vector<Response>& out) {
  const size_t V = static_cast<size_t>(vocab_size);
  const SequenceChunk& c = batch.chunks[i];
  const int32_t drafts = batch.drafts[i];
  const size_t first = fo.first_row[i] < 0 ? 0 : static_cast<size_t>(fo.first_row[i]);
  const bool on_device = fo.first_row[i] < 0;  // each row drawn by the device
  // The guesses hang from the root, the last token fed before them (the tokens before it, if any, are a kept branch
  // computed again: K/V only). Node n's row is drawn as the plain step after the path to it would be drawn; the
  // walk goes on to the child holding that draw (a chain's child of n is n + 1). K/V stands for the kept path's
  // nodes as far as each sits at the slot of its depth (a chain's always do; a tree's off the first-choice branch do
  // not, and the next step computes them again).
  const std::vector<int32_t>& parents = c.tree_parents;
  const auto root = static_cast<int32_t>(c.tokens.size()) - 1 - drafts;
  auto child_with = [&](int32_t node, int32_t token) {
    for (int32_t n = node + 1; n <= root + drafts; ++n)
      if ((parents.empty() ? n == node + 1 : parents[static_cast<size_t>(n)] == node) && c.tokens[static_cast<size_t>(n)] == token)
        return n;
    return -1;
  };
  int32_t node = root, depth = 0, placed = 0;
  // EAGLE: the model's features of the positions this pass computed for the kept path, its K/V in place or not
  // (keep_eagle_features): the rows up to the root's, then the path's.
  eagle_rows.clear();
  for (int32_t r = 0; eagle && r <= root; ++r) eagle_rows.push_back(r);
  for (;;) {
    const float* row = on_device ? nullptr : fo.logits.data() + (first + static_cast<size_t>(node)) * V;
    SampledToken tok;
    if (on_device) {
      const DeviceSample& d = fo.row_samples[static_cast<size_t>(fo.first_sample[i] + node)];
      tok = SampledToken{d.token, d.log_prob};
    } else {
      tok = sampler.sample(row, vocab_size, sampling_context(s));
    }
    const int32_t next = child_with(node, tok.token);
    s.num_computed = c.past_len + root + 1 + placed;
    emit_token(s, tok, row, t_tok, out);
    if (s.is_finished() || next < 0) break;
    ++accepted_drafts;
    node = next;
    if (eagle) eagle_rows.push_back(node);
    ++depth;
    if (placed == depth - 1 && node == root + depth) placed = depth;
  }
  keep_head_guesses(s, logit_first[i] + static_cast<size_t>(node));  // the row that drew the last token
  if (!s.is_finished()) kv.commit_full_blocks(s.block_table, s.tokens, s.num_computed, s.kv_root());  // prefix reuse
  // The draft model's K/V holds for the guesses that were kept; past them it is written again before it is read.
  s.draft_computed = std::min(s.draft_computed, s.num_computed - s.draft_base);
}

void Executor::Impl::keep_head_guesses(Sequence& s, size_t row) {
  // (a request that will never speculate — a guide, beams, num_draft_tokens 0 — costs no head rows; nor does any
  // while pp micro-batches are pipelined: no step speculates then, and under pp the heads' hidden rows would be
  // another micro-batch's by the time the last stage heard of them)
  if (medusa_heads <= 0 || micro_batches > 1 || s.is_finished() || !can_speculate(s) || s.request.num_draft_tokens == 0)
    return;
  head_rows.push_back(static_cast<int32_t>(row));
  head_seqs.push_back(&s);
  s.head_guesses_for = s.num_tokens();
}

void Executor::Impl::run_heads() {
  if (head_rows.empty()) return;
  model->head_guesses(head_rows, head_scratch);
  const auto k = static_cast<size_t>(medusa_heads) * kMedusaTopK;
  for (size_t i = 0; i < head_seqs.size(); ++i)
    head_seqs[i]->head_guesses.assign(head_scratch.begin() + static_cast<std::ptrdiff_t>(i * k),
                                      head_scratch.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
  head_rows.clear();
  head_seqs.clear();
}

}  // namespace engine
