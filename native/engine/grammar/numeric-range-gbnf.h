// Numbers within bounds as exact GBNF (JSON Schema's minimum / maximum / exclusiveMinimum / exclusiveMaximum): the
// classic numeric-range-to-regex construction, digit by digit, so [0, 120] is
// [0-9] | [1-9] [0-9] | "1" ( [01] [0-9] | "20" ). Output grows with the number of digits, never with the width of
// the range. Numbers are written canonically: no leading zeros, no "-0", no exponent (a bound on the value is a
// bound on the digits only when the exponent is fixed).
#pragma once
#include <cstdint>
#include <optional>

#include "grammar/gbnf-writer.h"

namespace engine {

// Bounds are at most this in magnitude (callers refuse larger ones), so negating never overflows.
constexpr int64_t kMaxRangeBound = 1000000000000000000;  // 1e18

// Integers in [min, max], either side open when nullopt; min <= max (the caller checks).
gbnf_writer::Expr integer_range_gbnf(std::optional<int64_t> min, std::optional<int64_t> max);

// An integer-valued bound on a decimal number.
struct DecimalBound {
  int64_t value = 0;
  bool exclusive = false;
};

// Decimal numbers (an integer part, optionally a fraction) whose value lies within the bounds; nullopt when no
// number does. Exact: with minimum 0, -0.5 is out and 0.5 in; with exclusiveMaximum 1, 0.99 is in and 1.0 out.
std::optional<gbnf_writer::Expr> decimal_range_gbnf(std::optional<DecimalBound> min, std::optional<DecimalBound> max);

}  // namespace engine
