#include "grammar/utf8-ranges.h"

#include <algorithm>
#include <string>

#include "utf8.h"

namespace engine::grammar {

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges) {
    if (r.lo > r.hi || r.lo > kMaxCodePoint) continue;
    const CodeRange c{r.lo, std::min(r.hi, kMaxCodePoint)};
    if (!merged.empty() && c.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, c.hi);
    else merged.push_back(c);
  }
  if (negate) {
    std::vector<CodeRange> complement;
    uint32_t next = 0;
    for (const CodeRange& r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  std::vector<CodeRange> out;  // without surrogates
  for (const CodeRange& r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) { out.push_back(r); continue; }
    if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
  }
  return out;
}


namespace {

// Splits [lo, hi] until both ends encode to the same length and every continuation byte but the ones the two ends
// differ in spans its whole range, so the range is exactly a product of per-byte ranges.
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  if (lo > hi) return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      split(lo, max, out);
      split(max + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (uint32_t i = 1; i < 4; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteRangeSeq seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodeRange>& ranges) {
  std::vector<ByteRangeSeq> out;
  for (const CodeRange& r : normalize_ranges(ranges, /*negate=*/false)) split(r.lo, r.hi, out);
  return out;
}

}  // namespace engine::grammar
