// A context-free grammar over bytes, the form every guide (JSON Schema, regex, GBNF) is compiled to before it
// constrains decoding. Rules are alternatives of sequences whose elements are byte sets or references to rules;
// repetition and Unicode classes are already lowered (gbnf-parser.h), so matching is a byte-level pushdown automaton
// (grammar-stacks.h) with no special cases.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace engine::grammar {

// A set of byte values, 256 bits.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  void add(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) bits[b >> 6] |= uint64_t{1} << (b & 63);
  }
  bool operator==(const ByteSet& o) const { return bits == o.bits; }
};

struct Element {
  enum Kind : int32_t { bytes = 0, rule = 1 };
  Kind kind = bytes;
  int32_t index = 0;  // into Grammar::sets (bytes) or Grammar::rules (rule)
};

struct Rule {
  std::string name;
  std::vector<std::vector<Element>> alternatives;  // an empty alternative matches the empty string
};

// Every element of every alternative, flattened so a matcher's position is one integer: the elements of an
// alternative are consecutive and followed by an `end` position, so the position after p is p + 1.
struct Position {
  enum Kind : int32_t { bytes = 0, rule = 1, end = 2 };
  Kind kind = end;
  int32_t index = 0;  // byte set or rule, as Element::index; unused for end
  int32_t owner = 0;  // the rule this position belongs to
};

// Which rules can match the empty string (a fixpoint).
std::vector<uint8_t> nullable_rules(const std::vector<Rule>& rules);

class Grammar {
 public:
  std::vector<ByteSet> sets;
  std::vector<Rule> rules;
  int32_t root = 0;

  int32_t add_set(const ByteSet& set);  // deduplicated
  int32_t add_rule(std::string name);   // an empty rule to fill in

  // Flattens the rules into positions and checks what the matcher relies on. Throws
  // EngineError(invalid_argument) naming the rule: a rule that refers to itself before consuming a byte (left
  // recursion), a rule that can never finish (matches no string). Call once, after the last rule is complete.
  void finalize();

  const std::vector<Position>& positions() const { return positions_; }
  // The first position of each alternative of a rule.
  const std::vector<int32_t>& starts(int32_t rule) const { return starts_[static_cast<size_t>(rule)]; }
  // Where a rule returns to when that is one place: the position after its only reference, or -1 (several, or the
  // root). A reference in tail position (the last element of an alternative) returns where its own rule returns,
  // as the matcher does not push a return for it. Lets the mask precomputation follow a rule's end into its only
  // caller (token-mask.h).
  int32_t unique_return(int32_t rule) const { return unique_return_[static_cast<size_t>(rule)]; }
  bool nullable(int32_t rule) const { return nullable_[static_cast<size_t>(rule)] != 0; }
  // The fewest bytes that finish the alternative from position p (p's own element included; 0 at an end).
  int64_t min_suffix_bytes(int32_t p) const { return min_suffix_[static_cast<size_t>(p)]; }

 private:
  std::vector<Position> positions_;
  std::vector<std::vector<int32_t>> starts_;
  std::vector<int32_t> unique_return_;
  std::vector<uint8_t> nullable_;
  std::vector<int64_t> min_suffix_;
};

}  // namespace engine::grammar
