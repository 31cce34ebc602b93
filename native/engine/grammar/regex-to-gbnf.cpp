#include "grammar/regex-to-gbnf.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "errors.h"

namespace engine {
namespace {

using gbnf_writer::CodePointSet;
using gbnf_writer::Expr;

// The GBNF parser expands {m,n} and refuses n above this (gbnf-parser.h's kMaxRepetition); checked here too so
// the message points into the regex.
constexpr uint64_t kMaxBound = 1000;
// Nested bounded repetitions multiply ((a{100}){100} is 10,000 copies): past this the regex is refused.
constexpr uint64_t kMaxExpanded = 100000;
constexpr uint64_t kSaturated = uint64_t{1} << 62;
// Groups are parsed, and the regex's tree walked, by recursion: their nesting is capped where it takes at most about
// 400 kB of stack (a 1 MB thread holds it; the threads that compile guides have 8 MB), and below the GBNF parser's
// cap on nested groups (gbnf-parser.h), which the written grammar's groups count against. Patterns nest a handful
// deep.
constexpr int kMaxRegexNesting = 256;

uint64_t sat_add(uint64_t a, uint64_t b) { return std::min(kSaturated, a + b); }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSaturated / b ? kSaturated : a * b;
}

// The regex as a tree. Groups leave no node of their own (captures mean nothing to a grammar).
struct Node {
  enum class Kind { empty, chars, seq, alt, repeat };
  Kind kind = Kind::empty;
  CodePointSet set;              // chars
  std::vector<Node> items;       // seq, alt; repeat: its one item
  uint64_t min = 0;              // repeat
  std::optional<uint64_t> max;   // repeat; nullopt = unbounded

  static Node chars(CodePointSet s) {
    Node n;
    n.kind = Kind::chars;
    n.set = std::move(s);
    return n;
  }
  static Node list(Kind kind, std::vector<Node> items) {
    if (items.size() == 1) return std::move(items[0]);
    if (items.empty()) return Node{};
    Node n;
    n.kind = kind;
    n.items = std::move(items);
    return n;
  }
  static Node repeated(Node item, uint64_t min, std::optional<uint64_t> max) {
    if (min == 1 && max && *max == 1) return item;
    Node n;
    n.kind = Kind::repeat;
    n.items.push_back(std::move(item));
    n.min = min;
    n.max = max;
    return n;
  }
};

// ---- character sets of the escapes ----

CodePointSet digit_set() { return CodePointSet::range('0', '9'); }
CodePointSet word_set() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
// ECMAScript's WhiteSpace and LineTerminator.
CodePointSet space_set() {
  CodePointSet s = CodePointSet::range('\t', '\r');
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) s.add(cp, cp);
  s.add(0x2000, 0x200A);
  return s;
}
// `.` without the s flag: anything but a line terminator.
CodePointSet dot_set() {
  CodePointSet terminators;
  for (uint32_t cp : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) terminators.add(cp, cp);
  return terminators.complement();
}

// ---- parsing ----

struct TopAlternative {
  Node node;
  bool anchored_start = false;
  bool anchored_end = false;
};

class RegexParser {
 public:
  explicit RegexParser(std::string_view regex) : regex_(regex) {
    const auto cps = gbnf_writer::decode_utf8(regex, "regex");
    size_t byte = 0;
    for (uint32_t cp : cps) {
      cps_.push_back(cp);
      offsets_.push_back(byte);
      byte += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }
    offsets_.push_back(byte);
  }

  std::vector<TopAlternative> parse() {
    std::vector<TopAlternative> alternatives;
    for (;;) {
      alternatives.push_back(top_alternative());
      if (at_end()) return alternatives;
      if (peek() == '|') {
        ++i_;
        continue;
      }
      fail(i_, "unbalanced parenthesis \")\"", "it closes no group");
    }
  }

 private:
  std::string_view regex_;
  std::vector<uint32_t> cps_;
  std::vector<size_t> offsets_;  // byte offset of each code point, and the end
  size_t i_ = 0;

  bool at_end() const { return i_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < cps_.size() ? cps_[i_ + ahead] : 0xFFFFFFFF; }

  std::string text(size_t from, size_t to) const {
    return std::string(regex_.substr(offsets_[from], offsets_[std::min(to, cps_.size())] - offsets_[from]));
  }

  [[noreturn]] void fail(size_t at, const std::string& what, const std::string& hint = "") const {
    std::string shown(regex_);
    if (shown.size() > 120) shown = shown.substr(0, 117) + "...";
    std::string message = "regex: " + what + " at offset " + std::to_string(offsets_[std::min(at, cps_.size())]) +
                          " in \"" + shown + "\"";
    if (!hint.empty()) message += ": " + hint;
    throw EngineError(ErrorCode::invalid_argument, message);
  }

  TopAlternative top_alternative() {
    TopAlternative out;
    if (!at_end() && peek() == '^') {
      out.anchored_start = true;
      ++i_;
    }
    out.node = alternative(0);
    if (!at_end() && peek() == '$') {
      out.anchored_end = true;
      ++i_;
      if (!at_end() && peek() != '|') fail(i_ - 1, "anchor \"$\" in the middle", kAnchorHint);
    }
    return out;
  }

  static constexpr const char* kAnchorHint =
      "only a leading ^ and a trailing $ (of the pattern or of a top-level alternative) are supported";

  // Groups recurse through disjunction -> alternative -> quantified -> group -> disjunction, so these frames repeat
  // per level of nesting and are kept lean: other atoms, quantifiers and failures are handled off that path.
  Node disjunction(int depth) {
    std::vector<Node> alternatives{alternative(depth)};
    while (!at_end() && peek() == '|') {
      ++i_;
      alternatives.push_back(alternative(depth));
    }
    return Node::list(Node::Kind::alt, std::move(alternatives));
  }

  Node alternative(int depth) {
    std::vector<Node> items;
    while (!at_end()) {
      const uint32_t c = peek();
      if (c == '|') break;
      if (c == ')') {
        if (depth == 0) stray(c);
        break;
      }
      if (c == '$' && depth == 0 && (i_ + 1 == cps_.size() || peek(1) == '|')) break;  // the trailing anchor
      if (c == '^' || c == '$') stray(c);
      items.push_back(quantified(depth));
    }
    return Node::list(Node::Kind::seq, std::move(items));
  }

  [[noreturn, gnu::noinline]] void stray(uint32_t c) const {
    if (c == ')') fail(i_, "unbalanced parenthesis \")\"", "it closes no group");
    fail(i_, std::string("anchor \"") + static_cast<char>(c) + "\" in the middle", kAnchorHint);
  }

  Node quantified(int depth) { return quantify(peek() == '(' ? group(depth) : atom()); }

  [[gnu::noinline]] Node quantify(Node atom_node) {
    uint64_t min = 0;
    std::optional<uint64_t> max;
    if (!quantifier(min, max)) return atom_node;
    if (!at_end() && peek() == '?') ++i_;  // lazy: the same language
    const size_t after = i_;
    uint64_t m2 = 0;
    std::optional<uint64_t> x2;
    if (quantifier(m2, x2)) fail(after, "nothing to repeat: quantifier \"" + text(after, i_) + "\" after a quantifier");
    return Node::repeated(std::move(atom_node), min, max);
  }

  // Reads *, +, ?, {m}, {m,}, {m,n} at the cursor. A '{' that does not start a well-formed quantifier is a literal
  // (as in JS without the u flag), so it is left alone.
  bool quantifier(uint64_t& min, std::optional<uint64_t>& max) {
    if (at_end()) return false;
    const uint32_t c = peek();
    const size_t at = i_;
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? std::optional<uint64_t>(1) : std::nullopt;
      return true;
    }
    if (c != '{') return false;
    size_t k = i_ + 1;
    auto number = [&](uint64_t& v) {
      const size_t start = k;
      v = 0;
      while (k < cps_.size() && cps_[k] >= '0' && cps_[k] <= '9') v = std::min(kSaturated, v * 10 + (cps_[k++] - '0'));
      return k > start;
    };
    uint64_t lo = 0, hi = 0;
    if (!number(lo)) return false;
    bool unbounded = false;
    if (k < cps_.size() && cps_[k] == ',') {
      ++k;
      if (!number(hi)) unbounded = true;
    } else {
      hi = lo;
    }
    if (k >= cps_.size() || cps_[k] != '}') return false;
    i_ = k + 1;
    const std::string shown = text(at, i_);
    if (!unbounded && hi < lo) fail(at, "bad quantifier \"" + shown + "\"", "the upper bound is below the lower bound");
    const uint64_t biggest = unbounded ? lo : hi;
    if (biggest > kMaxBound)
      fail(at, "repetition bound " + std::to_string(biggest) + " in \"" + shown + "\" above " + std::to_string(kMaxBound),
           "bounded repetition is expanded; use * or + for long runs");
    min = lo;
    max = unbounded ? std::nullopt : std::optional<uint64_t>(hi);
    return true;
  }

  // An atom other than a group.
  [[gnu::noinline]] Node atom() {
    const size_t at = i_;
    const uint32_t c = peek();
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return Node::chars(dot_set());
    }
    if (c == '\\') return Node::chars(escape(false));
    uint64_t m = 0;
    std::optional<uint64_t> x;
    if (c == '*' || c == '+' || c == '?' || (c == '{' && quantifier(m, x)))
      fail(at, "nothing to repeat: quantifier \"" + text(at, std::max(i_, at + 1)) + "\"");
    ++i_;
    return Node::chars(CodePointSet::range(c, c));
  }

  Node group(int depth) {
    const size_t at = i_;
    opening(depth);
    Node inner = disjunction(depth + 1);
    if (at_end() || peek() != ')') unclosed(at);
    ++i_;
    return inner;
  }

  // Past a group's opening: "(", "(?:" or "(?<name>"; the constructs a grammar cannot have are refused.
  [[gnu::noinline]] void opening(int depth) {
    const size_t at = i_;
    if (depth >= kMaxRegexNesting)
      fail(at, "groups nested more than " + std::to_string(kMaxRegexNesting) + " deep", "flatten the pattern");
    ++i_;  // (
    if (!at_end() && peek() == '?') {
      const uint32_t k = peek(1);
      if (k == ':') {
        i_ += 2;
      } else if (k == '=' || k == '!') {
        fail(at, "unsupported lookahead \"" + text(at, at + 3) + "\"",
             "a grammar cannot look ahead; rewrite the pattern without it");
      } else if (k == '<' && (peek(2) == '=' || peek(2) == '!')) {
        fail(at, "unsupported lookbehind \"" + text(at, at + 4) + "\"",
             "a grammar cannot look behind; rewrite the pattern without it");
      } else if (k == '<') {
        size_t e = i_ + 2;
        while (e < cps_.size() && cps_[e] != '>') ++e;
        if (e >= cps_.size() || e == i_ + 2) fail(at, "malformed named group \"" + text(at, e) + "\"");
        i_ = e + 1;
      } else {
        fail(at, "unsupported group \"" + text(at, at + 3) + "\"",
             "only (...), (?:...) and (?<name>...) are supported (no inline flags)");
      }
    }
  }

  [[noreturn, gnu::noinline]] void unclosed(size_t at) const {
    fail(at, "unbalanced parenthesis \"(\"", "it is never closed");
  }

  Node char_class() {
    const size_t at = i_;
    ++i_;  // [
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++i_;
    }
    CodePointSet set;
    for (;;) {
      if (at_end()) fail(at, "unbalanced bracket \"[\"", "the class is never closed");
      if (peek() == ']') {
        ++i_;
        break;
      }
      const size_t item_at = i_;
      bool lo_is_set = false;
      const CodePointSet lo = class_atom(lo_is_set);
      if (!at_end() && peek() == '-' && peek(1) != ']' && i_ + 1 < cps_.size()) {
        ++i_;
        bool hi_is_set = false;
        const CodePointSet hi = class_atom(hi_is_set);
        if (lo_is_set || hi_is_set)
          fail(item_at, "bad range \"" + text(item_at, i_) + "\"", "a class shorthand (\\d, \\w, \\s) cannot end a range; escape the '-' as \\-");
        const uint32_t a = *lo.single(), b = *hi.single();
        if (b < a) fail(item_at, "bad range \"" + text(item_at, i_) + "\"", "the range's end is below its start");
        set.add(a, b);
      } else {
        set.add(lo);
      }
    }
    if (negated) set = set.complement();
    if (set.empty()) fail(at, "empty class \"" + text(at, i_) + "\"", "it matches no character");
    return Node::chars(std::move(set));
  }

  CodePointSet class_atom(bool& is_set) {
    if (peek() == '\\') {
      const uint32_t e = peek(1);
      is_set = e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S';
      return escape(true);
    }
    const uint32_t c = cps_[i_++];
    is_set = false;
    return CodePointSet::range(c, c);
  }

  uint32_t hex_digits(size_t count, size_t at, const char* what) {
    uint32_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      const uint32_t h = peek();
      int d = h >= '0' && h <= '9' ? static_cast<int>(h - '0') : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
            : h >= 'A' && h <= 'F' ? static_cast<int>(h - 'A' + 10) : -1;
      if (d < 0) fail(at, std::string("malformed escape \"") + what + "\"", "expected a hexadecimal digit");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  uint32_t unicode_escape(size_t at) {
    if (peek() == '{') {
      ++i_;
      uint32_t v = 0;
      size_t digits = 0;
      while (!at_end() && peek() != '}') {
        v = std::min<uint32_t>(0x110000, v * 16 + hex_digits(1, at, "\\u{...}"));
        ++digits;
      }
      if (at_end() || digits == 0 || v > gbnf_writer::kMaxCodePoint) fail(at, "malformed escape \"" + text(at, i_) + "\"");
      ++i_;
      return v;
    }
    uint32_t v = hex_digits(4, at, "\\uHHHH");
    // A surrogate pair written as two escapes is one code point.
    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      const size_t save = i_;
      i_ += 2;
      bool ok = true;
      uint32_t lo = 0;
      for (int k = 0; k < 4 && ok; ++k) {
        const uint32_t h = peek();
        ok = (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
        if (ok) lo = lo * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10), ++i_;
      }
      if (ok && lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
      i_ = save;
    }
    return v;
  }

  // An escape at the cursor (a backslash); `in_class` changes \b (backspace) and allows \-.
  CodePointSet escape(bool in_class) {
    const size_t at = i_;
    ++i_;  // backslash
    if (at_end()) fail(at, "trailing backslash \"\\\"");
    const uint32_t e = cps_[i_++];
    auto one = [](uint32_t cp) { return CodePointSet::range(cp, cp); };
    switch (e) {
      case 'd': return digit_set();
      case 'D': return digit_set().complement();
      case 'w': return word_set();
      case 'W': return word_set().complement();
      case 's': return space_set();
      case 'S': return space_set().complement();
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case 'x': return one(hex_digits(2, at, "\\xHH"));
      case 'u': return one(unicode_escape(at));
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail(at, "malformed escape \"\\c\"", "expected a letter");
        ++i_;
        return one(l % 32);
      }
      case '0':
        if (peek() >= '0' && peek() <= '9')
          fail(at, "unsupported octal escape \"" + text(at, i_ + 1) + "\"", "write \\xHH instead");
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        fail(at, "unsupported word boundary \"\\b\"", "a grammar matches characters, not positions; remove it");
      case 'B':
        fail(at, "unsupported word boundary \"\\B\"", "a grammar matches characters, not positions; remove it");
      case 'k':
        fail(at, "unsupported backreference \"\\k\"", "a regular grammar cannot repeat a captured text");
      case 'p':
      case 'P':
        fail(at, std::string("unsupported Unicode property escape \"\\") + static_cast<char>(e) + "\"",
             "write the code point ranges as a class instead");
      default:
        break;
    }
    if (e >= '1' && e <= '9') fail(at, "unsupported backreference \"" + text(at, i_) + "\"", "a regular grammar cannot repeat a captured text");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
      fail(at, "unknown escape \"" + text(at, i_) + "\"");
    return one(e);  // \. \\ \/ \- \[ ... : the character itself
  }
};

// ---- normalization: nothing nullable under a repetition ----

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return true;
    case Node::Kind::chars: return false;
    case Node::Kind::seq: return std::all_of(n.items.begin(), n.items.end(), nullable);
    case Node::Kind::alt: return std::any_of(n.items.begin(), n.items.end(), nullable);
    case Node::Kind::repeat: return n.min == 0 || nullable(n.items[0]);
  }
  return false;
}

// L(n) without the empty string; nullopt when nothing is left. `n` is normalized (repeated items not nullable).
std::optional<Node> non_empty(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return std::nullopt;
    case Node::Kind::chars: return n;
    case Node::Kind::seq: {
      if (!nullable(n)) return n;
      // Every item can be empty: split on the first item that is not, a1' a2..ak | a2' a3..ak | ... | ak'.
      std::vector<Node> alternatives;
      for (size_t i = 0; i < n.items.size(); ++i) {
        auto head = non_empty(n.items[i]);
        if (!head) continue;
        std::vector<Node> seq{std::move(*head)};
        seq.insert(seq.end(), n.items.begin() + static_cast<std::ptrdiff_t>(i) + 1, n.items.end());
        alternatives.push_back(Node::list(Node::Kind::seq, std::move(seq)));
      }
      if (alternatives.empty()) return std::nullopt;
      return Node::list(Node::Kind::alt, std::move(alternatives));
    }
    case Node::Kind::alt: {
      std::vector<Node> alternatives;
      for (const Node& item : n.items)
        if (auto ne = non_empty(item)) alternatives.push_back(std::move(*ne));
      if (alternatives.empty()) return std::nullopt;
      return Node::list(Node::Kind::alt, std::move(alternatives));
    }
    case Node::Kind::repeat:
      if (n.min > 0) return n;
      return Node::repeated(n.items[0], 1, n.max);
  }
  return std::nullopt;
}

// Rewrites x{m,n} with a nullable x to the same language with a non-nullable item: since the empty string is in
// x, x^k is contained in x^(k+1), so x{m,n} = (x without "")^{0..n}. (a?)* becomes a*, (a|)+ becomes a*.
Node normalize(Node n) {
  for (Node& item : n.items) item = normalize(std::move(item));
  if (n.kind != Node::Kind::repeat) return n;
  if (n.max && *n.max == 0) return Node{};
  if (!nullable(n.items[0])) return n;
  auto item = non_empty(n.items[0]);
  if (!item) return Node{};
  return Node::repeated(std::move(*item), 0, n.max);
}

// ---- measures ----

uint64_t min_length(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return 0;
    case Node::Kind::chars: return 1;
    case Node::Kind::seq: {
      uint64_t s = 0;
      for (const Node& i : n.items) s = sat_add(s, min_length(i));
      return s;
    }
    case Node::Kind::alt: {
      uint64_t m = kSaturated;
      for (const Node& i : n.items) m = std::min(m, min_length(i));
      return m;
    }
    case Node::Kind::repeat: return sat_mul(n.min, min_length(n.items[0]));
  }
  return 0;
}

std::optional<uint64_t> max_length(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return 0;
    case Node::Kind::chars: return 1;
    case Node::Kind::seq: {
      uint64_t s = 0;
      for (const Node& i : n.items) {
        auto m = max_length(i);
        if (!m) return std::nullopt;
        s = sat_add(s, *m);
      }
      return s;
    }
    case Node::Kind::alt: {
      uint64_t s = 0;
      for (const Node& i : n.items) {
        auto m = max_length(i);
        if (!m) return std::nullopt;
        s = std::max(s, *m);
      }
      return s;
    }
    case Node::Kind::repeat: {
      const auto m = max_length(n.items[0]);
      if (m && *m == 0) return 0;
      if (!n.max || !m) return std::nullopt;
      return sat_mul(*n.max, *m);
    }
  }
  return 0;
}

// How many elements the GBNF parser makes when it expands the bounded repetitions.
uint64_t expanded_size(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty: return 0;
    case Node::Kind::chars: return 1;
    case Node::Kind::seq:
    case Node::Kind::alt: {
      uint64_t s = 0;
      for (const Node& i : n.items) s = sat_add(s, expanded_size(i));
      return s;
    }
    case Node::Kind::repeat: return sat_mul(expanded_size(n.items[0]), std::max<uint64_t>(1, n.max ? *n.max : n.min + 1));
  }
  return 0;
}

// JSON's two-character escapes (RFC 8259), the form used for these code points; nullptr for the others.
const char* json_short_escape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

}  // namespace

Expr json_content_char(uint32_t cp) {
  if (const char* short_form = json_short_escape(cp)) return gbnf_writer::literal(short_form);
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    return gbnf_writer::literal(buf);
  }
  std::string s;
  gbnf_writer::append_utf8(s, cp);
  return gbnf_writer::literal(s);
}

// The characters JSON must escape (" \ and U+0000-U+001F) are spelled escaped: \" \\ and the short forms where JSON
// has them, \u00XX (either case) for the other control characters. The rest are written as themselves.
Expr json_content_chars(const CodePointSet& set) {
  if (auto one = set.single()) return json_content_char(*one);
  CodePointSet specials = CodePointSet::range(0, 0x1F);
  specials.add('"', '"');
  specials.add('\\', '\\');
  const CodePointSet plain = set.minus(specials);
  const CodePointSet escaped = set.intersect(specials);
  std::vector<Expr> alternatives;
  if (!plain.empty()) alternatives.push_back(gbnf_writer::char_class(plain));
  if (auto one = escaped.single()) {
    alternatives.push_back(json_content_char(*one));
  } else if (!escaped.empty()) {
    CodePointSet short_forms;       // the letter after the backslash
    CodePointSet u_high0, u_high1;  // \u000X and \u001X: the hex digit X
    for (const auto& [lo, hi] : escaped.ranges()) {
      for (uint32_t cp = lo; cp <= hi; ++cp) {
        if (const char* s = json_short_escape(cp)) {
          short_forms.add(static_cast<uint8_t>(s[1]), static_cast<uint8_t>(s[1]));
          continue;
        }
        CodePointSet& digits = cp < 0x10 ? u_high0 : u_high1;
        const uint32_t x = cp & 0xF;
        if (x < 10) {
          digits.add('0' + x, '0' + x);
        } else {
          digits.add('a' + x - 10, 'a' + x - 10);
          digits.add('A' + x - 10, 'A' + x - 10);
        }
      }
    }
    std::vector<Expr> after_backslash;
    if (!short_forms.empty()) after_backslash.push_back(gbnf_writer::char_class(short_forms));
    std::vector<Expr> u_forms;
    if (!u_high0.empty()) u_forms.push_back(gbnf_writer::sequence({gbnf_writer::literal("0"), gbnf_writer::char_class(u_high0)}));
    if (!u_high1.empty()) u_forms.push_back(gbnf_writer::sequence({gbnf_writer::literal("1"), gbnf_writer::char_class(u_high1)}));
    if (!u_forms.empty())
      after_backslash.push_back(gbnf_writer::sequence({gbnf_writer::literal("u00"), gbnf_writer::alternation(std::move(u_forms))}));
    alternatives.push_back(gbnf_writer::sequence({gbnf_writer::literal("\\"), gbnf_writer::alternation(std::move(after_backslash))}));
  }
  return gbnf_writer::alternation(std::move(alternatives));
}

namespace {

// ---- emission ----

class Emitter {
 public:
  explicit Emitter(RegexAlphabet alphabet) : alphabet_(alphabet) {}

  Expr node(const Node& n) const {
    switch (n.kind) {
      case Node::Kind::empty: return Expr{};
      case Node::Kind::chars: return chars(n.set);
      case Node::Kind::seq: {
        std::vector<Expr> items;
        for (const Node& i : n.items) items.push_back(node(i));
        return gbnf_writer::sequence(std::move(items));
      }
      case Node::Kind::alt: return alternatives(n.items);
      case Node::Kind::repeat: return gbnf_writer::repeat(node(n.items[0]), n.min, n.max);
    }
    return Expr{};
  }

  Expr alternatives(const std::vector<Node>& items) const {
    // Single characters: one class. Plain words: a trie, so shared prefixes are decided one character at a time.
    bool all_chars = true, all_words = true;
    CodePointSet merged;
    bool has_empty = false;
    std::vector<std::vector<uint32_t>> words;
    for (const Node& i : items) {
      std::vector<uint32_t> word;
      if (i.kind == Node::Kind::empty) {
        has_empty = true;
      } else if (i.kind == Node::Kind::chars) {
        merged.add(i.set);
        if (auto s = i.set.single()) word.push_back(*s); else all_words = false;
      } else {
        all_chars = false;
        if (i.kind != Node::Kind::seq) all_words = false;
        for (const Node& c : i.items) {
          if (c.kind == Node::Kind::chars && c.set.single()) word.push_back(*c.set.single());
          else all_words = false;
        }
      }
      words.push_back(std::move(word));
    }
    if (all_chars) {
      Expr e = merged.empty() ? Expr{} : chars(merged);
      return has_empty ? gbnf_writer::optional(std::move(e)) : e;
    }
    if (all_words) return gbnf_writer::word_set(words, [this](uint32_t cp) { return spell(cp); });
    std::vector<Expr> out;
    for (const Node& i : items) out.push_back(node(i));
    return gbnf_writer::alternation(std::move(out));
  }

  Expr spell(uint32_t cp) const {
    if (alphabet_ == RegexAlphabet::json_string_content) return json_content_char(cp);
    std::string s;
    gbnf_writer::append_utf8(s, cp);
    return gbnf_writer::literal(s);
  }

  Expr chars(const CodePointSet& set) const {
    if (alphabet_ == RegexAlphabet::json_string_content) return json_content_chars(set);
    return gbnf_writer::char_class(set);
  }

 private:
  RegexAlphabet alphabet_;
};

}  // namespace

RegexTranslation translate_regex(std::string_view regex, const RegexOptions& options) {
  std::vector<TopAlternative> tops = RegexParser(regex).parse();
  const Emitter emit(options.alphabet);
  RegexTranslation out;
  uint64_t expanded = 0;
  for (TopAlternative& t : tops) {
    t.node = normalize(std::move(t.node));
    expanded = sat_add(expanded, expanded_size(t.node));
  }
  if (expanded > kMaxExpanded)
    throw EngineError(ErrorCode::invalid_argument,
                      "regex: the bounded repetitions of \"" + std::string(regex.substr(0, 120)) + "\" expand to more than " +
                          std::to_string(kMaxExpanded) + " grammar elements; use * or + for long runs");

  if (options.anchoring == RegexAnchoring::whole) {
    std::vector<Node> nodes;
    for (TopAlternative& t : tops) nodes.push_back(std::move(t.node));
    const Node all = normalize(Node::list(Node::Kind::alt, std::move(nodes)));
    out.expr = emit.node(all);
    out.min_length = min_length(all);
    out.max_length = max_length(all);
    return out;
  }

  // Search: each top-level alternative may match anywhere its anchors allow; an unanchored side is padded with
  // any characters. An alternative that can match the empty string somewhere unanchored matches every text.
  const Expr any_run = gbnf_writer::repeat(gbnf_writer::raw(options.any_char), 0, std::nullopt);
  std::vector<Expr> alternatives;
  out.min_length = kSaturated;
  out.max_length = 0;
  for (const TopAlternative& t : tops) {
    const bool open = !t.anchored_start || !t.anchored_end;
    if (open && nullable(t.node)) {
      out.expr = any_run;
      out.min_length = 0;
      out.max_length = std::nullopt;
      return out;
    }
    std::vector<Expr> seq;
    if (!t.anchored_start) seq.push_back(any_run);
    seq.push_back(emit.node(t.node));
    if (!t.anchored_end) seq.push_back(any_run);
    alternatives.push_back(gbnf_writer::sequence(std::move(seq)));
    out.min_length = std::min(out.min_length, min_length(t.node));
    const auto m = open ? std::nullopt : max_length(t.node);
    out.max_length = out.max_length && m ? std::optional<uint64_t>(std::max(*out.max_length, *m)) : std::nullopt;
  }
  out.expr = gbnf_writer::alternation(std::move(alternatives));
  return out;
}

std::string regex_to_gbnf(std::string_view regex, const std::string& rule_name, std::string& rules_out) {
  gbnf_writer::RuleSet rules;
  rules.define(rule_name, translate_regex(regex).expr);
  rules_out += rules.text();
  return rule_name;
}

}  // namespace engine
