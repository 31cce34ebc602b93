// What the grammar tests share: a byte-level vocabulary, a position mask's accepted ids as one bitset, and a thread
// with a small stack for deep inputs.
#pragma once
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/compiled-grammar.h"

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
