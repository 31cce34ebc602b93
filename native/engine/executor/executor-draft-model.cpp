// Speculation by draft model (ExecutorConfig::draft_model_tokens): the draft model keeps its own K/V of each
// speculating sequence in its own pool (Sequence::draft_blocks, on this rank alone: it never goes to followers), and
// each step first catches up on the tokens it has not seen — the whole prompt the first time, afterwards the kept
// guesses' last one and the model's own next token — which gives its first guess, then feeds each guess back for
// the next. Guesses are argmaxes (a drafter whose mass sits on one token), so checking them against the model's
// draws keeps the output exactly the plain one for greedy and sampled requests alike (executor-speculation.cpp).
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

void Executor::Impl::release_draft(Sequence& s) {
  if (!draft_model) return;
  draft_kv.release(s.draft_blocks);
  s.draft_computed = 0;
}

std::vector<std::vector<int32_t>> Executor::Impl::draft_model_guesses(const IterationBatch& b,
                                                                     const std::vector<DraftAsk>& asks) {
  std::vector<std::vector<int32_t>> out(asks.size());
  std::vector<int32_t> room(asks.size(), 0);
  const int32_t max_pos = draft_model->config().max_position_embeddings;
  const SampleOn pick = draft_model->samples_on_device() ? SampleOn::device_argmax : SampleOn::host;
  // The draft's next chunk of `s`: `tokens` at the positions after those it has computed.
  auto chunk_of = [&](const Sequence& s, std::vector<int32_t> tokens) {
    SequenceChunk c;
    c.tokens = std::move(tokens);
    c.past_len = s.draft_computed;
    c.block_ids = s.draft_blocks;
    c.sample_on = pick;
    return c;
  };
  // Blocks for every position the draft will have fed: the sequence's tokens and all guesses but the last.
  std::vector<size_t> pending;
  for (size_t k = 0; k < asks.size(); ++k) {
    Sequence& s = *b.seqs[asks[k].chunk];
    const int32_t n = s.num_tokens();
    room[k] = max_pos > 0 ? std::min(asks[k].room, max_pos - n + 1) : asks[k].room;
    s.draft_computed = std::min(s.draft_computed, n - 1);
    if (room[k] <= 0 || !draft_kv.ensure_capacity(s.draft_blocks, static_cast<int64_t>(n) + room[k] - 1)) continue;
    pending.push_back(k);
  }
  // Catch-up passes, within an iteration's token budget each; a sequence's last one gives its first guess.
  std::vector<SequenceChunk> chunks;
  std::vector<size_t> who;
  ForwardOutput fo;
  const int32_t vocab = vocab_size;
  while (!pending.empty()) {
    chunks.clear();
    who.clear();
    std::vector<size_t> later;
    int64_t pass_budget = scheduler_config.max_num_tokens;
    for (size_t k : pending) {
      Sequence& s = *b.seqs[asks[k].chunk];
      const int64_t left = s.num_tokens() - s.draft_computed;
      if (pass_budget <= 0 || static_cast<int32_t>(chunks.size()) >= scheduler_config.max_batch_size) {
        later.push_back(k);
        continue;
      }
      const int32_t take = static_cast<int32_t>(std::min(left, pass_budget));
      chunks.push_back(chunk_of(s, {s.tokens.begin() + s.draft_computed, s.tokens.begin() + s.draft_computed + take}));
      who.push_back(k);
      pass_budget -= take;
      s.draft_computed += take;
      if (take < left) later.push_back(k);
    }
    draft_model->forward(chunks, fo);
    for (size_t i = 0; i < who.size(); ++i) {
      const Sequence& s = *b.seqs[asks[who[i]].chunk];
      if (s.draft_computed != s.num_tokens()) continue;  // more to catch up on
      const int32_t t = draft_choice(fo, i, vocab);
      if (t >= 0) out[who[i]].push_back(t);
    }
    pending = std::move(later);
  }
  // Each guess fed back for the next, one token per sequence a pass.
  for (size_t j = 1;; ++j) {
    chunks.clear();
    who.clear();
    for (size_t k = 0; k < asks.size(); ++k) {
      if (out[k].size() != j || static_cast<int32_t>(j) >= room[k]) continue;
      Sequence& s = *b.seqs[asks[k].chunk];
      chunks.push_back(chunk_of(s, {out[k].back()}));
      who.push_back(k);
      ++s.draft_computed;
    }
    if (chunks.empty()) break;
    draft_model->forward(chunks, fo);
    for (size_t i = 0; i < who.size(); ++i) {
      const int32_t t = draft_choice(fo, i, vocab);
      if (t >= 0) out[who[i]].push_back(t);
    }
  }
  return out;
}

}  // namespace engine
