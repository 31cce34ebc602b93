#include "grammar/numeric-range-gbnf.h"

#include <algorithm>
#include <string>
#include <vector>

namespace engine {
namespace {

using gbnf_writer::CodePointSet;
using gbnf_writer::Expr;

Expr digits(char lo, char hi) { return gbnf_writer::char_class(CodePointSet::range(lo, hi)); }
Expr any_digits(uint64_t min, std::optional<uint64_t> max) { return gbnf_writer::repeat(digits('0', '9'), min, max); }

// Digit strings of one length, x <= y, leading zeros allowed (they are suffixes of longer numbers): the first
// digit either equals both ends' (recurse), or is x's (then anything from x's rest up), strictly between (then
// anything), or y's (then anything up to y's rest).
Expr same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return Expr{};
  if (x == y) return gbnf_writer::literal(x);
  const std::string x_rest = x.substr(1), y_rest = y.substr(1);
  if (x[0] == y[0]) return gbnf_writer::sequence({gbnf_writer::literal(x.substr(0, 1)), same_length(x_rest, y_rest)});
  const size_t rest = x_rest.size();
  const bool low_full = x_rest == std::string(rest, '0');   // x's row starts at its first number
  const bool high_full = y_rest == std::string(rest, '9');  // y's row ends at its last number
  const char mid_lo = low_full ? x[0] : static_cast<char>(x[0] + 1);
  const char mid_hi = high_full ? y[0] : static_cast<char>(y[0] - 1);
  std::vector<Expr> alternatives;
  if (!low_full) alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal(x.substr(0, 1)), same_length(x_rest, std::string(rest, '9'))}));
  if (mid_lo <= mid_hi) alternatives.push_back(gbnf_writer::sequence({digits(mid_lo, mid_hi), any_digits(rest, rest)}));
  if (!high_full) alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal(y.substr(0, 1)), same_length(std::string(rest, '0'), y_rest)}));
  return gbnf_writer::alternation(std::move(alternatives));
}

// Non-negative integers in [lo, hi] (hi nullopt: unbounded), canonical (no leading zeros).
Expr non_negative(int64_t lo, std::optional<int64_t> hi) {
  const std::string a = std::to_string(lo);
  if (!hi) {
    if (lo == 0) return gbnf_writer::alternation({gbnf_writer::literal("0"), gbnf_writer::sequence({digits('1', '9'), any_digits(0, std::nullopt)})});
    // 10^k and up: every number of k+1 or more digits.
    if (a == "1" + std::string(a.size() - 1, '0')) return gbnf_writer::sequence({digits('1', '9'), any_digits(a.size() - 1, std::nullopt)});
    return gbnf_writer::alternation({same_length(a, std::string(a.size(), '9')),
                                     gbnf_writer::sequence({digits('1', '9'), any_digits(a.size(), std::nullopt)})});
  }
  const std::string b = std::to_string(*hi);
  if (a.size() == b.size()) return same_length(a, b);
  std::vector<Expr> alternatives{same_length(a, std::string(a.size(), '9'))};
  if (b.size() - a.size() >= 2)  // every number with a length strictly between
    alternatives.push_back(gbnf_writer::sequence({digits('1', '9'), any_digits(a.size(), b.size() - 2)}));
  alternatives.push_back(same_length("1" + std::string(b.size() - 1, '0'), b));
  return gbnf_writer::alternation(std::move(alternatives));
}

// An interval of integers; hi nullopt = unbounded. Empty when lo > hi.
struct Interval {
  int64_t lo = 0;
  std::optional<int64_t> hi;
  bool empty() const { return hi && *hi < lo; }
};

Interval intersect(Interval a, Interval b) {
  Interval out{std::max(a.lo, b.lo), a.hi};
  if (b.hi) out.hi = a.hi ? std::min(*a.hi, *b.hi) : *b.hi;
  return out;
}

// Magnitudes x >= 0 written as digits with an optional fraction, with lo <(=) x <(=) hi. A number whose fraction
// is zero has the value of its integer part I, so I must be inside the bounds; one with a non-zero fraction lies
// strictly between I and I + 1, so lo <= I and I + 1 <= hi whatever the bounds' exclusivity. The two sets of integer
// parts differ at most at the ends, which get their own alternatives.
std::optional<Expr> magnitudes(int64_t lo, bool lo_exclusive, std::optional<int64_t> hi, bool hi_exclusive) {
  const Interval whole{lo + (lo_exclusive ? 1 : 0), hi ? std::optional<int64_t>(*hi - (hi_exclusive ? 1 : 0)) : std::nullopt};
  const Interval fractional{lo, hi ? std::optional<int64_t>(*hi - 1) : std::nullopt};
  const Expr any_fraction = gbnf_writer::sequence({gbnf_writer::literal("."), any_digits(1, std::nullopt)});
  const Expr zero_fraction = gbnf_writer::sequence({gbnf_writer::literal("."), gbnf_writer::repeat(gbnf_writer::literal("0"), 1, std::nullopt)});
  const Expr nonzero_fraction = gbnf_writer::sequence({gbnf_writer::literal("."), gbnf_writer::repeat(gbnf_writer::literal("0"), 0, std::nullopt),
                                                       digits('1', '9'), any_digits(0, std::nullopt)});
  std::vector<Expr> alternatives;
  const Interval both = intersect(whole, fractional);
  if (!both.empty()) alternatives.push_back(gbnf_writer::sequence({non_negative(both.lo, both.hi), gbnf_writer::optional(any_fraction)}));
  // whole \ fractional is at most {hi} (an inclusive upper bound): hi itself, with a zero fraction only.
  if (hi && !hi_exclusive && *hi >= whole.lo && (both.empty() || *hi > *both.hi))
    alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal(std::to_string(*hi)), gbnf_writer::optional(zero_fraction)}));
  // fractional \ whole is at most {lo} (an exclusive lower bound): just above lo.
  if (lo_exclusive && !fractional.empty() && lo < whole.lo && (!fractional.hi || lo <= *fractional.hi))
    alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal(std::to_string(lo)), nonzero_fraction}));
  if (alternatives.empty()) return std::nullopt;
  return gbnf_writer::alternation(std::move(alternatives));
}

}  // namespace

Expr integer_range_gbnf(std::optional<int64_t> min, std::optional<int64_t> max) {
  std::vector<Expr> alternatives;
  if (!max || *max >= 0) alternatives.push_back(non_negative(min ? std::max<int64_t>(*min, 0) : 0, max));
  if (!min || *min < 0) {
    // Negatives: magnitudes from -(the largest negative allowed) to -min.
    const int64_t magnitude_lo = max && *max < 0 ? -*max : 1;
    const Expr magnitudes = min ? non_negative(magnitude_lo, -*min) : non_negative(magnitude_lo, std::nullopt);
    alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal("-"), magnitudes}));
  }
  return gbnf_writer::alternation(std::move(alternatives));
}

std::optional<Expr> decimal_range_gbnf(std::optional<DecimalBound> min, std::optional<DecimalBound> max) {
  std::vector<Expr> alternatives;
  // Non-negative numbers x with min <(=) x <(=) max.
  if (!max || max->value > 0 || (max->value == 0 && !max->exclusive)) {
    const bool min_counts = min && min->value >= 0;
    if (auto e = magnitudes(min_counts ? min->value : 0, min_counts && min->exclusive, max ? std::optional<int64_t>(max->value) : std::nullopt,
                            max && max->exclusive))
      alternatives.push_back(std::move(*e));
  }
  // Negative numbers -x (x > 0, never "-0") with min <(=) -x <(=) max, i.e. -max <(=) x <(=) -min.
  if (!min || min->value < 0) {
    const bool max_counts = max && -max->value > 0;
    if (auto e = magnitudes(max_counts ? -max->value : 0, max_counts ? max->exclusive : true,
                            min ? std::optional<int64_t>(-min->value) : std::nullopt, min && min->exclusive))
      alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal("-"), std::move(*e)}));
  }
  if (alternatives.empty()) return std::nullopt;
  return gbnf_writer::alternation(std::move(alternatives));
}

}  // namespace engine
