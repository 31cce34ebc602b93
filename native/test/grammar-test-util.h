// What the grammar tests share: a byte-level vocabulary, a position mask's accepted ids as one bitset, two matchers
// walked side by side, and a thread with a small stack for deep inputs.
#pragma once
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "grammar/compiled-grammar.h"
#include "grammar/grammar-matcher.h"

namespace engine::grammar::test {

// Every single byte (so any text can be spelled) and `pieces`, sorted without repeats, then the stop token (no
// text) as the last id, returned in `stop`.
inline std::shared_ptr<const TokenVocab> byte_vocab(std::vector<std::string> pieces, int32_t& stop) {
  for (int b = 1; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  std::sort(pieces.begin(), pieces.end());
  pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
  stop = static_cast<int32_t>(pieces.size());
  pieces.push_back("");
  return std::make_shared<TokenVocab>(std::move(pieces), stop + 1);
}

// Accepted ids as one bitset, whichever form the mask keeps them in.
inline std::vector<uint64_t> accepted_bits(const PositionMask& m, const TokenVocab& vocab) {
  std::vector<uint64_t> bits = m.accepted_bits;
  bits.resize(vocab.mask_words(), 0);
  for (int32_t id : m.accepted_ids) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  return bits;
}

struct SideBySide {
  int steps = 0, mismatches = 0;
};

// Walks `m` and `ref` (matchers of one guide) together for up to `max_steps` tokens drawn from ref's mask with
// std::mt19937(seed), counting the steps whose masks differ. `stop` (the vocabulary's last id) is drawn only when
// `may_stop`, and then mostly passed over for another allowed token; drawing it ends the walk.
inline SideBySide walk_side_by_side(GrammarMatcher& m, GrammarMatcher& ref, int32_t stop, uint32_t seed,
                                    int max_steps, bool may_stop) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask, want;
  SideBySide out;
  for (; out.steps < max_steps; ++out.steps) {
    m.fill_mask(mask);
    ref.fill_mask(want);
    if (mask != want) ++out.mismatches;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < (may_stop ? stop + 1 : stop); ++id)
      if ((want[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u) allowed.push_back(id);
    if (allowed.empty()) break;
    int32_t pick = allowed[rng() % allowed.size()];
    if (pick == stop && allowed.size() > 1 && rng() % 8 != 0) pick = allowed[rng() % (allowed.size() - 1)];
    if (pick == stop) break;
    CHECK(m.accept_token(pick) && ref.accept_token(pick));
  }
  return out;
}

// Runs `fn` on a thread whose stack is `bytes` and rethrows what it threw. 1 MB is an eighth of what the threads
// that compile and match guides get (the addon's caller, the executor's loop, OpenMP's threads: 8 MB by default), so
// a pass that recursed as deep as its input crashes the test here, and a capped recursion shows its margin.
inline void on_small_stack(const std::function<void()>& fn, size_t bytes = size_t{1} << 20) {
  struct Call {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } call{&fn, nullptr};
  auto run = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->fn)();
    } catch (...) {
      c->error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  const int failed = pthread_create(&thread, &attr, run, &call);
  pthread_attr_destroy(&attr);
  if (failed != 0) throw std::runtime_error("pthread_create failed: " + std::to_string(failed));
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
}

}  // namespace engine::grammar::test
