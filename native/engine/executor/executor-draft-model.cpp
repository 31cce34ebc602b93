// Speculation by draft model (ExecutorConfig::draft_model_tokens): the draft model keeps its own K/V of each
// speculating sequence in its own pool (Sequence::draft_blocks, on this rank alone: it never goes to followers), and
// each step first catches up on the tokens it has not seen — the whole prompt the first time, afterwards the kept
// guesses' last one and the model's own next token — which gives its first guess, then feeds each guess back for
// the next. Guesses are argmaxes (a drafter whose mass sits on one token), so checking them against the model's
// draws keeps the output exactly the plain one for greedy and sampled requests alike (executor-speculation.cpp).
// EAGLE heads (eagle/eagle-checkpoint.h) are such a draft whose slot i reads token i + 1 beside the model's final
// hidden state at position i (Sequence::eagle_features, kept from the model's passes): it catches up on the
// positions the model has computed, its last slot's output gives the first guess, and each guess is fed back with
// the draft's own output as its feature. Slots fed with guesses are never kept (draft_computed stays at the model's
// positions): the model's own features for them arrive with the pass that checks the guesses. EAGLE-3 heads read
// the model's residual streams of three layers instead (eagle_feature_width floats a position, through their fc),
// and a guess's slot still reads the draft's own output (hidden wide): catch-up and guess passes never mix, so each
// pass's features have one width. With eagle_choices the guesses are a tree instead (executor-eagle-tree.cpp), and
// the model's features of a kept path may run past its computed K/V (a kept branch off the first choices is
// computed again next step): the draft reads every position whose feature it has.
#include <algorithm>
#include <utility>

#include "executor/executor-impl.h"

namespace engine {
namespace {

// The draft's choice for chunk i of its last pass: the argmax over the ids both vocabularies have (lowest id on
// ties, as the sampler's greedy draw); -1 when it chose an id the model does not have.
int32_t draft_choice(const ForwardOutput& fo, size_t i, int32_t vocab) {
  if (fo.first_row[i] < 0) {
    const int32_t t = fo.sampled[i].token;
    return t < vocab ? t : -1;
  }
  const float* row = fo.logits.data() + static_cast<size_t>(fo.first_row[i]) * static_cast<size_t>(fo.vocab_size);
  const int32_t n = std::min(vocab, fo.vocab_size);
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

std::vector<int32_t> top_choices(const float* row, int32_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int32_t j = 0; j < vocab; ++j) ids[static_cast<size_t>(j)] = j;
  const int32_t k = std::min(vocab, kMedusaTopK);
  // Likeliest first, the lower id on ties (rank 0 is then draft_choice's argmax).
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

void Executor::Impl::release_draft(Sequence& s) {
  if (!draft_model) return;
  draft_kv.release(s.draft_blocks);
  s.draft_computed = 0;
  s.draft_base = 0;
  s.eagle_features.clear();
}

bool Executor::Impl::eagle_takes_chunk(Sequence& s, const SequenceChunk& c) {
  const int64_t kept = static_cast<int64_t>(s.eagle_features.size()) / eagle_feature_width;
  // Nothing read or kept yet (a new sequence, one whose prefix came from the cache, one that starts over): the
  // draft starts at this chunk. Rope sees only distances, so the draft over positions from draft_base guesses as it
  // would for a sequence that began there.
  if (s.draft_computed == 0 && kept == 0) s.draft_base = c.past_len;
  // (features may already cover the chunk's first positions: a kept path computed again, verify_drafts)
  return s.draft_base + s.draft_computed + kept >= c.past_len;
}

bool Executor::Impl::eagle_may_draft(const Sequence& s) const {
  const Request& r = s.request;
  return eagle && !s.is_beam_search() && !s.matcher && !r.output.return_generation_logits && s.release_window == 0 &&
         s.window_cap == 0 && r.num_draft_tokens != 0;
}

void Executor::Impl::keep_eagle_features(Sequence& s, const SequenceChunk& c, size_t first_row) {
  if (!eagle_may_draft(s) || s.is_finished()) return;
  const auto F = static_cast<size_t>(eagle_feature_width);
  // The chunk's rows whose positions follow each other from past_len: a check's kept path (eagle_rows), else the
  // positions this pass computed for good.
  std::vector<int32_t> rows = eagle_rows;
  if (rows.empty())
    for (int32_t r = 0; r < s.num_computed - c.past_len; ++r) rows.push_back(r);
  const int64_t have = c.all_logits ? static_cast<int64_t>(c.tokens.size()) : 1;
  int64_t total = 0;
  const float* hidden = model->final_hidden(total);
  if (rows.empty()) return;
  if (!eagle_takes_chunk(s, c) || rows.back() >= have || static_cast<int64_t>(first_row) + rows.back() >= total) {
    // A gap the draft cannot read across: it stays out until it starts over (a pause releases it).
    s.eagle_features.clear();
    return;
  }
  const int64_t kept = static_cast<int64_t>(s.eagle_features.size() / F);
  const int64_t end = s.draft_base + s.draft_computed + kept;  // the first position without a feature
  for (size_t j = static_cast<size_t>(std::max<int64_t>(0, end - c.past_len)); j < rows.size(); ++j) {
    const float* from = hidden + (first_row + static_cast<size_t>(rows[j])) * F;
    s.eagle_features.insert(s.eagle_features.end(), from, from + F);
  }
}

std::vector<TokenTree> Executor::Impl::draft_model_guesses(const IterationBatch& b, const std::vector<DraftAsk>& asks) {
  std::vector<std::vector<int32_t>> out(asks.size());
  std::vector<int32_t> room(asks.size(), 0);
  const int32_t max_pos = draft_model->config().max_position_embeddings;
  const SampleOn pick = draft_model->samples_on_device() ? SampleOn::device_argmax : SampleOn::host;
  const auto H = static_cast<size_t>(model_config.hidden_size);  // a guess's feature: the draft's own output
  const auto F = static_cast<size_t>(eagle_feature_width);        // a position the model computed
  // The positions the draft computes from the sequence itself: every token for a draft model; for EAGLE those whose
  // model features it has read or holds (slot i reads token i + 1 and the model's feature of position i).
  const int32_t shift = eagle ? 1 : 0;
  auto known = [&](const Sequence& s) {
    return eagle ? s.draft_computed + static_cast<int32_t>(s.eagle_features.size() / F) : s.num_tokens();
  };
  // The draft's chunk of `s` at position `past`.
  auto chunk_of = [&](const Sequence& s, std::vector<int32_t> tokens, int32_t past) {
    SequenceChunk c;
    c.tokens = std::move(tokens);
    c.past_len = past;
    c.block_ids = s.draft_blocks;
    c.sample_on = pick;
    return c;
  };
  // Blocks for every position the draft will have fed: the known ones and all guesses but the last.
  std::vector<size_t> pending;
  for (size_t k = 0; k < asks.size(); ++k) {
    Sequence& s = *b.seqs[asks[k].chunk];
    const int32_t n = known(s);
    room[k] = max_pos > 0 ? std::min(asks[k].room, max_pos - n + 1) : asks[k].room;
    if (eagle) {  // new features, through the one before the last token: the draft's last slot reads that token
      if (s.draft_computed >= n || s.draft_base + n != s.num_tokens() - 1) continue;
    } else {
      s.draft_computed = std::min(s.draft_computed, n - 1);
    }
    if (room[k] <= 0 || !draft_kv.ensure_capacity(s.draft_blocks, static_cast<int64_t>(n) + room[k] - 1)) continue;
    pending.push_back(k);
  }
  // Catch-up passes, within an iteration's token budget each; a sequence's last one gives its first guess.
  std::vector<SequenceChunk> chunks;
  std::vector<size_t> who;
  std::vector<float> features;  // EAGLE: the pass's feature rows, in chunk order (F wide catching up, H guessing)
  size_t width = F;
  std::vector<float> last(eagle ? asks.size() * H : 0);  // EAGLE: each sequence's last output, its next feature
  std::vector<std::vector<int32_t>> root_top(eagle_trees ? asks.size() : 0);  // EAGLE trees: the root's best guesses
  ForwardOutput fo;
  const int32_t vocab = vocab_size;
  // The draft's pass over `chunks`; EAGLE keeps each chunk's last output row for its next guess.
  auto run = [&] {
    if (eagle) draft_model->set_input_features(features.data(), static_cast<int64_t>(width));
    draft_model->forward(chunks, fo);
    if (!eagle) return;
    int64_t rows = 0;
    const float* hidden = draft_model->final_hidden(rows);
    for (size_t i = 0; i < who.size(); ++i)
      std::copy_n(hidden + static_cast<size_t>(fo.first_row[i]) * H, H, last.data() + who[i] * H);
  };
  while (!pending.empty()) {
    chunks.clear();
    who.clear();
    features.clear();
    std::vector<size_t> later;
    int64_t pass_budget = scheduler_config.max_num_tokens;
    for (size_t k : pending) {
      Sequence& s = *b.seqs[asks[k].chunk];
      const int64_t left = known(s) - s.draft_computed;
      if (pass_budget <= 0 || static_cast<int32_t>(chunks.size()) >= scheduler_config.max_batch_size) {
        later.push_back(k);
        continue;
      }
      const int32_t take = static_cast<int32_t>(std::min(left, pass_budget));
      const auto from = s.tokens.begin() + s.draft_base + s.draft_computed + shift;
      chunks.push_back(chunk_of(s, {from, from + take}, s.draft_computed));
      who.push_back(k);
      if (eagle) {
        const auto rows = s.eagle_features.begin() + static_cast<std::ptrdiff_t>(take * F);
        features.insert(features.end(), s.eagle_features.begin(), rows);
        s.eagle_features.erase(s.eagle_features.begin(), rows);
      }
      pass_budget -= take;
      s.draft_computed += take;
      if (take < left) later.push_back(k);
    }
    run();
    for (size_t i = 0; i < who.size(); ++i) {
      const Sequence& s = *b.seqs[asks[who[i]].chunk];
      if (s.draft_computed != known(s)) continue;  // more to catch up on
      if (eagle_trees) {
        root_top[who[i]] = top_choices(fo.logits.data() + static_cast<size_t>(fo.first_row[i]) * static_cast<size_t>(fo.vocab_size),
                                       std::min(vocab, fo.vocab_size));
        continue;
      }
      const int32_t t = draft_choice(fo, i, vocab);
      if (t >= 0) out[who[i]].push_back(t);
    }
    pending = std::move(later);
  }
  if (eagle_trees) {
    std::vector<int32_t> caught_up(asks.size());
    for (size_t k = 0; k < asks.size(); ++k) caught_up[k] = known(*b.seqs[asks[k].chunk]);
    return grow_eagle_trees(b, asks, room, caught_up, root_top, last);
  }
  // Each guess fed back for the next, one token per sequence a pass (EAGLE: with the draft's own last output).
  width = H;
  for (size_t j = 1;; ++j) {
    chunks.clear();
    who.clear();
    features.clear();
    for (size_t k = 0; k < asks.size(); ++k) {
      if (out[k].size() != j || static_cast<int32_t>(j) >= room[k]) continue;
      Sequence& s = *b.seqs[asks[k].chunk];
      chunks.push_back(chunk_of(s, {out[k].back()}, known(s) + static_cast<int32_t>(j) - 1));
      who.push_back(k);
      if (eagle)
        features.insert(features.end(), last.begin() + static_cast<std::ptrdiff_t>(k * H),
                        last.begin() + static_cast<std::ptrdiff_t>((k + 1) * H));
      else
        ++s.draft_computed;
    }
    if (chunks.empty()) break;
    run();
    for (size_t i = 0; i < who.size(); ++i) {
      const int32_t t = draft_choice(fo, i, vocab);
      if (t >= 0) out[who[i]].push_back(t);
    }
  }
  std::vector<TokenTree> chains(asks.size());
  for (size_t k = 0; k < asks.size(); ++k) {
    chains[k].tokens = std::move(out[k]);
    for (size_t j = 0; j < chains[k].tokens.size(); ++j) chains[k].parents.push_back(static_cast<int32_t>(j));
  }
  return chains;
}

}  // namespace engine
