#include "grammar/compiled-grammar.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <unordered_set>

#include "grammar/position-signature.h"

namespace engine::grammar {
namespace {

// How many cuts up a position's chain of unique return sites may be tried.
constexpr size_t kMaxCuts = 8;
// A cut walk is kept when at most this share of the vocabulary reaches the cut (each position it serves walks
// those tokens again); past it the walk stops early.
constexpr int32_t kCutUncertainShare = 32;
// ... and when the tokens that reached it are this many times fewer than the tokens the walk stepped.
constexpr int64_t kResolveGain = 8;
// A whole walk that steps this share of the vocabulary is costly: later copies of its rule try cut walks.
constexpr int32_t kCostlyShare = 16;
// A position's signatures (whole and cut) may unfold one node per this many tokens of the vocabulary (a node costs
// a few times a token's step): at most a fraction of the walk they may save.
constexpr int32_t kSignatureShare = 16;

// A bitset costs mask_words() words to OR in; a list, one bit set per id. Keeps whichever is cheaper.
void settle(PositionMask& mask, const TokenVocab& vocab) {
  if (mask.accepted_ids.size() <= vocab.mask_words()) return;
  if (mask.accepted_bits.empty()) mask.accepted_bits.assign(vocab.mask_words(), 0);
  for (int32_t id : mask.accepted_ids) mask.accepted_bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  mask.accepted_ids.clear();
  mask.accepted_ids.shrink_to_fit();
}

// Runs job(0 .. n - 1), on up to `threads` OpenMP threads when parallel. A job's exception (out of memory) is
// rethrown on this thread when serial; after a parallel round the answer is false and the positions left are
// computed by position_mask when asked.
template <typename Job>
bool run_jobs(int n, int threads, bool parallel, const Job& job) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, std::min(n, threads))) if (parallel && n > 1)
  for (int k = 0; k < n; ++k) {
    try {
      job(k);
    } catch (...) {
      errors[static_cast<size_t>(k)] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) {
      if (!parallel) std::rethrow_exception(e);
      return false;
    }
  return true;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, CompiledGrammarOptions options)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), masks_(grammar_.positions().size(), nullptr) {
  if (options.share_equal_positions) {
    if (options.store) {
      std::lock_guard<std::mutex> lock(options.store->mutex());
      if (!options.store->bind(vocab_.get())) options.store = nullptr;  // (another vocabulary's: share nothing)
    }
    store_ = options.store ? std::move(options.store) : std::make_shared<MaskStore>();
    signatures_ = std::make_unique<PositionSignatures>(grammar_, vocab_->max_token_bytes(), *store_);
  }
}

CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::share_locked(int32_t pos) const {
  if (!store_) return -1;
  std::lock_guard<std::mutex> lock(store_->mutex());
  signatures_->begin(std::max<int64_t>(256, static_cast<int64_t>(vocab_->sorted().size()) / kSignatureShare));
  const int32_t signature = signatures_->of(pos);
  if (signature >= 0)
    if (const PositionMask* shared = store_->find(signature)) masks_[static_cast<size_t>(pos)] = shared;
  return signature;
}

const PositionMask* CompiledGrammar::keep_locked(int32_t signature, std::unique_ptr<PositionMask> mask) const {
  settle(*mask, *vocab_);
  const size_t size = mask_size(*mask);
  if (store_ && signature >= 0) {
    std::lock_guard<std::mutex> lock(store_->mutex());
    if (const PositionMask* shared = store_->find(signature)) return shared;  // (an equal walk stored meanwhile)
    if (const PositionMask* kept = store_->keep(signature, mask)) {
      mask_bytes_ += size;
      return kept;
    }
  }
  mask_bytes_ += size;
  owned_.push_back(std::move(mask));
  return owned_.back().get();
}

std::vector<int32_t> CompiledGrammar::cuts_of(int32_t pos) const {
  std::vector<int32_t> cuts;
  if (!store_) return cuts;
  // Each return site up the chain (reaching it: the rule below ended) and, after a byte there, the position past it
  // (a string's closing quote: what follows it is what tells copies of the string apart). A rule with no unique
  // return ends the chain (the walk pops there anyway).
  std::vector<int32_t> seen;
  for (int32_t rule = grammar_.positions()[static_cast<size_t>(pos)].owner; cuts.size() < kMaxCuts;) {
    const int32_t site = grammar_.unique_return(rule);
    if (site < 0 || std::find(seen.begin(), seen.end(), rule) != seen.end()) break;
    seen.push_back(rule);
    if (site != pos) cuts.push_back(site);
    if (grammar_.positions()[static_cast<size_t>(site)].kind == Position::bytes && site + 1 != pos) cuts.push_back(site + 1);
    rule = grammar_.positions()[static_cast<size_t>(site)].owner;
  }
  return cuts;
}

size_t CompiledGrammar::mask_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mask_bytes_;
}

size_t CompiledGrammar::vocabulary_walks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return vocabulary_walks_;
}

size_t CompiledGrammar::completed_from_cuts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_from_cuts_;
}

bool CompiledGrammar::has_mask(int32_t pos) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_[static_cast<size_t>(pos)] != nullptr;
}

const PositionMask& CompiledGrammar::position_mask(int32_t pos) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const PositionMask* slot = masks_[static_cast<size_t>(pos)]) return *slot;
  }
  // Computed outside the lock, so threads compute different cold positions at once; two threads meeting the same
  // new position (or two equal ones) both compute it, and the first one stored is kept.
  compute({pos}, 1, /*parallel=*/false);
  std::lock_guard<std::mutex> lock(mutex_);
  return *masks_[static_cast<size_t>(pos)];
}

void CompiledGrammar::precompute(std::vector<int32_t> positions, int32_t ranks_per_part) const {
  compute(std::move(positions), ranks_per_part, /*parallel=*/true);
}

void CompiledGrammar::compute_serial(std::vector<int32_t> positions) const {
  compute(std::move(positions), 1, /*parallel=*/false);
}

// A position's mask, cheapest first: the store's mask for its signature (an equal position's, of this guide or an
// earlier one); else a walk cut at a point up its chain of return sites (cuts_of), shared by every position with
// the same cut signature — a string's characters cut past its closing quote look the same in every property of
// every schema — completed for this position by walking again only the tokens that reached the cut (resolve_cut);
// else its own whole walk. A cut walk pays off only where whole walks are costly, so one is made only for
// positions of a rule whose whole walk was found costly before (the first string of the first guide pays in full),
// and kept only when few tokens reach the cut (a string may end after any character: its characters' own return
// site is no use as a cut, the point past its closing quote is); else the next cut out is tried. In rounds: each
// round plans what every position needs, makes the planned walks (each split in rank ranges when parallel), then
// completes the positions whose cut walk is ready.
void CompiledGrammar::compute(std::vector<int32_t> positions, int32_t ranks_per_part, bool parallel) const {
  struct Pending {
    int32_t pos;
    int32_t signature;
    std::vector<int32_t> cuts;      // positions, innermost first, while a cut there changes what the walk sees
    std::vector<int32_t> cut_sigs;  // the walk's signature with each cut
    std::vector<uint8_t> asked;     // whether a position of another whole signature asked for that cut walk too
  };
  struct Walk {
    int32_t pos, cut, signature;
    int32_t rule_key;  // a whole walk: where its costliness is recorded (the signature with its innermost cut)
  };
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int32_t p : positions) {
      if (masks_[static_cast<size_t>(p)]) continue;
      Pending q{p, share_locked(p), {}, {}, {}};
      if (masks_[static_cast<size_t>(p)]) continue;
      if (store_ && q.signature >= 0) {
        std::lock_guard<std::mutex> store_lock(store_->mutex());
        for (int32_t cut : cuts_of(p)) {
          const int32_t s = signatures_->of(p, cut);
          if (s < 0 || s == q.signature) break;  // (a cut there, or further out, changes nothing the walk sees)
          q.cuts.push_back(cut);
          q.cut_sigs.push_back(s);
          q.asked.push_back(store_->ask(s, q.signature));
        }
      }
      pending.push_back(std::move(q));
    }
  }
  const int32_t ranks = static_cast<int32_t>(vocab_->sorted().size());
  const size_t cut_limit = static_cast<size_t>(std::max(64, ranks / kCutUncertainShare));
  const int64_t costly = std::max<int64_t>(256, ranks / kCostlyShare);
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int32_t parts = parallel ? std::max(1, std::min(threads * 2, ranks / std::max(1, ranks_per_part))) : 1;
  while (!pending.empty()) {
    std::vector<Walk> walks;
    std::vector<std::pair<size_t, const PositionMask*>> resolve;  // (pending index, its cut walk)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::unique_lock<std::mutex> store_lock;
      if (store_) store_lock = std::unique_lock<std::mutex>(store_->mutex());
      std::unordered_set<int32_t> planned;  // signatures walked this round (a walk serves every equal position)
      for (size_t i = 0; i < pending.size(); ++i) {
        const Pending& q = pending[i];
        if (masks_[static_cast<size_t>(q.pos)]) continue;
        if (q.signature >= 0)
          if (const PositionMask* shared = store_->find(q.signature)) {
            masks_[static_cast<size_t>(q.pos)] = shared;
            continue;
          }
        // Outermost cut first: the fewer tokens reach the cut, the cheaper a position is to complete from it. A cut
        // walk already made serves at once; a new one is made only where positions of two whole signatures asked
        // for it (so it will serve more than the one walk it costs) and the rule's walks are costly.
        const PositionMask* via = nullptr;
        size_t chosen = q.cuts.size();
        for (size_t level = q.cuts.size(); level-- > 0 && !via;) {
          const int32_t s = q.cut_sigs[level];
          if (store_->shallow().count(s) != 0) continue;
          if (const PositionMask* walked = store_->find(s)) {
            if (walked->uncertain.size() <= cut_limit) via = walked;
          } else if (chosen == q.cuts.size() && q.asked[level]) {
            chosen = level;
          }
        }
        if (via) {
          resolve.emplace_back(i, via);
        } else if (chosen < q.cuts.size() && store_->costly().count(q.cut_sigs[0]) != 0) {
          if (planned.insert(q.cut_sigs[chosen]).second)
            walks.push_back(Walk{q.pos, q.cuts[chosen], q.cut_sigs[chosen], -1});
        } else if (q.signature < 0 || planned.insert(q.signature).second) {
          walks.push_back(Walk{q.pos, -1, q.signature, q.cut_sigs.empty() ? -1 : q.cut_sigs[0]});
        }
      }
    }
    // The planned walks, each in `parts` rank ranges walked by whichever thread is free; joined in rank order they
    // are exactly the serial walk's lists.
    const int items = static_cast<int>(walks.size()) * parts;
    std::vector<PositionMask> done(static_cast<size_t>(items));
    std::vector<WalkResult> results(static_cast<size_t>(items));
    const bool walked = run_jobs(items, threads, parallel, [&](int k) {
      const Walk& w = walks[static_cast<size_t>(k / parts)];
      const int32_t part = k % parts;
      const int32_t first = static_cast<int32_t>(static_cast<int64_t>(ranks) * part / parts);
      const int32_t end = static_cast<int32_t>(static_cast<int64_t>(ranks) * (part + 1) / parts);
      results[static_cast<size_t>(k)] = walk_position(grammar_, *vocab_, w.pos, w.cut, first, end,
                                                      w.cut < 0 ? SIZE_MAX : cut_limit, done[static_cast<size_t>(k)]);
    });
    if (!walked) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      vocabulary_walks_ += walks.size();
      for (size_t i = 0; i < walks.size(); ++i) {
        auto mask = std::make_unique<PositionMask>();
        bool complete = true;
        int64_t steps = 0;
        for (int32_t part = 0; part < parts; ++part) {
          const size_t k = i * static_cast<size_t>(parts) + static_cast<size_t>(part);
          complete = complete && results[k].complete;
          steps += results[k].steps;
          mask->accepted_ids.insert(mask->accepted_ids.end(), done[k].accepted_ids.begin(), done[k].accepted_ids.end());
          mask->uncertain.insert(mask->uncertain.end(), done[k].uncertain.begin(), done[k].uncertain.end());
        }
        const Walk& w = walks[i];
        if (w.cut >= 0) {
          // Kept when completing a position from it (a walk of its uncertain tokens) costs a fraction of a walk;
          // one the store has no room for is given up as well.
          const bool worth = complete && mask->uncertain.size() <= cut_limit &&
                             static_cast<int64_t>(mask->uncertain.size()) * kResolveGain <= steps;
          std::lock_guard<std::mutex> store_lock(store_->mutex());
          settle(*mask, *vocab_);
          const size_t size = mask_size(*mask);
          if (worth && store_->keep(w.signature, mask)) mask_bytes_ += size;
          else store_->shallow().insert(w.signature);
          continue;
        }
        if (store_ && steps >= costly && w.rule_key >= 0) {
          std::lock_guard<std::mutex> store_lock(store_->mutex());
          store_->costly().insert(w.rule_key);
        }
        const PositionMask* kept = keep_locked(w.signature, std::move(mask));
        if (!masks_[static_cast<size_t>(w.pos)]) masks_[static_cast<size_t>(w.pos)] = kept;
      }
    }
    // The positions whose cut walk was ready: their own masks from its uncertain tokens alone.
    std::vector<std::unique_ptr<PositionMask>> resolved(resolve.size());
    const bool completed = run_jobs(static_cast<int>(resolve.size()), threads, parallel, [&](int j) {
      const auto& [index, cut_walk] = resolve[static_cast<size_t>(j)];
      resolved[static_cast<size_t>(j)] =
          std::make_unique<PositionMask>(resolve_cut(grammar_, *vocab_, pending[index].pos, *cut_walk));
    });
    if (!completed) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t j = 0; j < resolve.size(); ++j) {
      const Pending& q = pending[resolve[j].first];
      if (masks_[static_cast<size_t>(q.pos)]) continue;
      masks_[static_cast<size_t>(q.pos)] = keep_locked(q.signature, std::move(resolved[j]));
      ++completed_from_cuts_;
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [this](const Pending& q) { return masks_[static_cast<size_t>(q.pos)] != nullptr; }),
                  pending.end());
  }
}

}  // namespace engine::grammar
