// Unicode code-point ranges as UTF-8 byte sequences, so a character class of the guide's language becomes byte sets
// the byte-level matcher walks: [a-é] is [a-z] | [\xC3][\x80-\xA9] | ... Surrogates (U+D800-U+DFFF) are never
// encoded (they are not characters in UTF-8).
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace engine::grammar {

struct CodeRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

// One alternative: a sequence of 1-4 byte ranges, each byte of the character inside its range.
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged, surrogates removed; `negate` gives the complement over all code points.
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges, bool negate);

// The byte-range sequences whose union is exactly the UTF-8 encodings of `ranges` (normalized first).
std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodeRange>& ranges);


}  // namespace engine::grammar
