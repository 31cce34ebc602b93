// What the grammar tests share: a byte-level vocabulary and a position mask's accepted ids as one bitset.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
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

}  // namespace engine::grammar::test
