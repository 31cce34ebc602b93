#include "grammar/gbnf-parser.h"

#include <functional>
#include <unordered_map>

#include "errors.h"
#include "grammar/utf8-ranges.h"
#include "utf8.h"

namespace engine::grammar {
namespace {

using Seq = std::vector<Element>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, std::string what) : s_(text), what_(std::move(what)) {}

  Grammar run() {
    for (;;) {
      skip_space();
      if (i_ >= s_.size()) break;
      const size_t at = i_;
      if (!is_name_char(s_[i_])) fail("expected a rule name (`name ::= ...`), got '" + std::string(1, s_[i_]) + "'", at);
      const std::string name = ident();
      skip_space();
      if (s_.substr(i_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'", i_);
      i_ += 3;
      const int32_t r = rule_id(name, at);
      if (defined_[static_cast<size_t>(r)]) fail("rule '" + name + "' is defined twice", at);
      defined_[static_cast<size_t>(r)] = 1;
      auto alts = alternatives(name);
      g_.rules[static_cast<size_t>(r)].alternatives = std::move(alts);
    }
    const auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[static_cast<size_t>(root->second)])
      throw EngineError(ErrorCode::invalid_argument, what_ + ": no `root ::= ...` rule (the start rule must be named root)");
    for (const auto& [name, id] : ids_)
      if (!defined_[static_cast<size_t>(id)])
        fail("rule '" + name + "' is used but never defined", first_use_[static_cast<size_t>(id)]);
    g_.root = root->second;
    check_repeats();
    try {
      g_.finalize();
    } catch (const EngineError& e) {
      const std::string m = e.what();
      throw EngineError(ErrorCode::invalid_argument, what_ + m.substr(m.find(':')));
    }
    return std::move(g_);
  }

 private:
  struct Repeat {
    int32_t rule;   // R ::= S R | ""
    size_t offset;  // of the repeated expression
    char op;
  };

  [[noreturn]] void fail(const std::string& problem, size_t at, const std::string& hint = "") const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw EngineError(ErrorCode::invalid_argument, what_ + ": " + problem + " at line " + std::to_string(line) +
                                                       ", column " + std::to_string(col) +
                                                       (hint.empty() ? "" : "; " + hint));
  }

  void skip_space() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string ident() {
    const size_t start = i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  // A name followed by `::=`: the next rule begins, so the current one ends.
  bool at_rule_start() const {
    size_t k = i_;
    if (k >= s_.size() || !is_name_char(s_[k])) return false;
    while (k < s_.size() && is_name_char(s_[k])) ++k;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\n' || s_[k] == '\r')) ++k;
    return s_.substr(k, 3) == "::=";
  }

  int32_t rule_id(const std::string& name, size_t at) {
    const auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t r = g_.add_rule(name);
    ids_.emplace(name, r);
    defined_.push_back(0);
    first_use_.push_back(at);
    return r;
  }

  int32_t fresh_rule(const std::string& context, const char* kind, size_t at) {
    const int32_t r = g_.add_rule(context + "/" + kind + "@" + std::to_string(at));
    defined_.push_back(1);
    first_use_.push_back(at);
    return r;
  }

  [[gnu::noinline]] void count(size_t n, size_t at) {
    elements_ += n;
    if (elements_ > kMaxGrammarElements)
      fail("the grammar expands to more than " + std::to_string(kMaxGrammarElements) +
           " elements (large bounded repetitions {m,n} are expanded); use a smaller bound or `*`", at);
  }

  std::vector<Seq> alternatives(const std::string& context) {
    std::vector<Seq> alts;
    alts.push_back(sequence(context));
    for (;;) {
      skip_space();
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        alts.push_back(sequence(context));
      } else {
        return alts;
      }
    }
  }

  // Groups recurse through sequence -> group -> alternatives -> sequence, so these frames repeat per level of
  // nesting and are kept lean: the postfix operators and the other atoms are handled off that path.
  Seq sequence(const std::string& context) {
    Seq out;
    for (;;) {
      skip_space();
      if (i_ >= s_.size() || s_[i_] == ')' || s_[i_] == '|' || at_rule_start()) return out;
      const size_t atom_at = i_;
      Seq s = postfix(s_[i_] == '(' ? group(context) : atom(context), atom_at, context);
      count(s.size(), atom_at);
      out.insert(out.end(), s.begin(), s.end());
    }
  }

  // The atom `s` read at atom_at with its postfix operators applied, if any.
  [[gnu::noinline]] Seq postfix(Seq s, size_t atom_at, const std::string& context) {
    // The first postfix operator repeats fresh copies of the atom (parsed again), so a class or group copied by
    // {m,n} gets its own rules, each with one caller; later operators copy what the earlier ones made.
    std::function<Seq()> make = [this, atom_at, &context]() {
      const size_t saved = i_;
      i_ = atom_at;
      Seq copy = atom(context);
      i_ = saved;
      return copy;
    };
    for (;;) {
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c != '*' && c != '+' && c != '?' && c != '{') break;
      const size_t op_at = i_;
      int32_t lo = 0, hi = -1;  // -1: unbounded
      ++i_;
      if (c == '+') lo = 1;
      if (c == '?') hi = 1;
      if (c == '{') bounds(lo, hi, op_at);
      s = repeat(std::move(s), make, lo, hi, context, atom_at, c);
      const Seq made = s;
      make = [made]() { return made; };
    }
    return s;
  }

  void bounds(int32_t& lo, int32_t& hi, size_t at) {
    auto number = [&]() {
      skip_space();
      const size_t start = i_;
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        v = v * 10 + (s_[i_] - '0');
        if (v > kMaxRepetition)
          fail("a repetition bound above " + std::to_string(kMaxRepetition) +
                   " (bounded repetition is expanded; use `*` or `+`)",
               start);
        ++i_;
      }
      if (i_ == start) fail("expected a number in the repetition {m,n}", start);
      return static_cast<int32_t>(v);
    };
    lo = number();
    skip_space();
    if (i_ < s_.size() && s_[i_] == ',') {
      ++i_;
      skip_space();
      hi = (i_ < s_.size() && s_[i_] == '}') ? -1 : number();
    } else {
      hi = lo;
    }
    skip_space();
    if (i_ >= s_.size() || s_[i_] != '}') fail("expected '}' to close the repetition {m,n}", at);
    ++i_;
    if (hi >= 0 && hi < lo)
      fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} has its upper bound below its lower bound",
           at);
  }

  // first: the expression itself (one copy); make(): another fresh copy of it.
  Seq repeat(Seq first, const std::function<Seq()>& make, int32_t lo, int32_t hi, const std::string& context,
             size_t at, char op) {
    Seq out;
    bool used_first = false;
    auto copy = [&]() {
      if (!used_first) { used_first = true; return first; }
      return make();
    };
    for (int32_t k = 0; k < lo; ++k) {
      Seq c = copy();
      count(c.size(), at);
      out.insert(out.end(), c.begin(), c.end());
    }
    if (hi < 0) {  // R ::= S R | ""
      const int32_t r = fresh_rule(context, "*", at);
      Seq body = copy();
      body.push_back(Element{Element::rule, r});
      g_.rules[static_cast<size_t>(r)].alternatives = {std::move(body), {}};
      repeats_.push_back(Repeat{r, at, op});
      out.push_back(Element{Element::rule, r});
      return out;
    }
    // Up to hi - lo more, nested (S (S (S)?)?)? so each count has one parse.
    int32_t outer = -1, prev = -1;
    for (int32_t k = lo; k < hi; ++k) {
      const int32_t r = fresh_rule(context, "?", at);
      Seq body = copy();
      count(body.size(), at);
      g_.rules[static_cast<size_t>(r)].alternatives = {std::move(body), {}};
      if (prev >= 0) g_.rules[static_cast<size_t>(prev)].alternatives[0].push_back(Element{Element::rule, r});
      if (outer < 0) outer = r;
      prev = r;
    }
    if (outer >= 0) out.push_back(Element{Element::rule, outer});
    return out;
  }

  [[gnu::noinline]] Seq atom(const std::string& context) {
    const size_t at = i_;
    const char c = s_[i_];
    if (c == '(') return group(context);
    if (c == '"') return literal();
    if (c == '[') return char_class(context);
    if (c == '.') {
      ++i_;
      return lower_class({{0, kMaxCodePoint}}, context, at);
    }
    if (is_name_char(c)) {
      const std::string name = ident();
      return {Element{Element::rule, rule_id(name, at)}};
    }
    fail(std::string("unexpected '") + c + "'", at);
  }

  Seq group(const std::string& context) {
    const size_t at = i_++;
    if (++depth_ > kMaxGroupNesting) too_deep(at);
    auto alts = alternatives(context);
    skip_space();
    if (i_ >= s_.size() || s_[i_] != ')') unclosed(at);
    ++i_;
    --depth_;
    if (alts.size() == 1) return std::move(alts[0]);
    const int32_t r = fresh_rule(context, "()", at);
    g_.rules[static_cast<size_t>(r)].alternatives = std::move(alts);
    return {Element{Element::rule, r}};
  }

  // (the failures of group, out of line: their messages' temporaries would enlarge its frame)
  [[noreturn, gnu::noinline]] void unclosed(size_t at) const { fail("expected ')' to close the group opened", at); }
  [[noreturn, gnu::noinline]] void too_deep(size_t at) const {
    fail("groups ( ... ) nested more than " + std::to_string(kMaxGroupNesting) + " deep", at,
         "give inner groups rules of their own");
  }

  uint32_t hex(size_t digits, size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (i_ >= s_.size()) fail("unfinished escape", at);
      const char h = s_[i_++];
      uint32_t d;
      if (h >= '0' && h <= '9') d = static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') d = static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') d = static_cast<uint32_t>(h - 'A' + 10);
      else fail(std::string("'") + h + "' is not a hexadecimal digit in an escape", i_ - 1);
      v = v * 16 + d;
    }
    if (v > kMaxCodePoint) fail("escape beyond U+10FFFF", at);
    return v;
  }

  // One code point of a literal or class, escapes decoded; UTF-8 in the grammar text is read as such.
  uint32_t code_point() {
    const size_t at = i_;
    const auto b = static_cast<uint8_t>(s_[i_++]);
    if (b == '\\') {
      if (i_ >= s_.size()) fail("unfinished escape", at);
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'f': return '\f';
        case 'v': return '\v';
        case '0': return 0;
        case 'x': return hex(2, at);
        case 'u': return hex(4, at);
        case 'U': return hex(8, at);
        case '\\': case '"': case '/': case '[': case ']': case '-': case '^': case '\'': case '.': return static_cast<uint8_t>(e);
        default: fail(std::string("unknown escape '\\") + e + "'", at);
      }
    }
    if (b < 0x80) return b;
    int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (extra < 0) fail("invalid UTF-8 in the grammar text", at);
    uint32_t cp = b & (0x3F >> extra);
    for (int k = 0; k < extra; ++k) {
      if (i_ >= s_.size() || (static_cast<uint8_t>(s_[i_]) & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text", at);
      cp = (cp << 6) | (static_cast<uint8_t>(s_[i_++]) & 0x3F);
    }
    return cp;
  }

  Seq literal() {
    const size_t at = i_++;
    Seq out;
    std::string bytes;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string literal", at);
      if (s_[i_] == '"') { ++i_; break; }
      append_utf8(bytes, code_point());
    }
    for (const char c : bytes) {
      const auto b = static_cast<uint8_t>(c);
      ByteSet set;
      set.add(b, b);
      out.push_back(Element{Element::bytes, g_.add_set(set)});
    }
    return out;
  }

  Seq char_class(const std::string& context) {
    const size_t at = i_++;
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') { negate = true; ++i_; }
    std::vector<CodeRange> ranges;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated character class", at);
      if (s_[i_] == ']') { ++i_; break; }
      const size_t item_at = i_;
      const uint32_t lo = code_point();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = code_point();
        if (hi < lo) fail("character range with its end below its start", item_at);
      }
      ranges.push_back({lo, hi});
    }
    return lower_class(normalize_ranges(std::move(ranges), negate), context, at);
  }

  // A class as one byte set when every member is one byte, else a fresh rule: one alternative for the one-byte
  // members together and one per multi-byte range sequence.
  Seq lower_class(const std::vector<CodeRange>& ranges, const std::string& context, size_t at) {
    const auto seqs = utf8_sequences(ranges);
    if (seqs.empty()) fail("the character class matches no character", at);
    ByteSet single;
    bool any_single = false;
    std::vector<Seq> alts;
    for (const ByteRangeSeq& seq : seqs) {
      if (seq.size() == 1) {
        single.add(seq[0].first, seq[0].second);
        any_single = true;
        continue;
      }
      Seq alt;
      for (const auto& [lo, hi] : seq) {
        ByteSet set;
        set.add(lo, hi);
        alt.push_back(Element{Element::bytes, g_.add_set(set)});
      }
      alts.push_back(std::move(alt));
    }
    if (any_single) alts.insert(alts.begin(), Seq{Element{Element::bytes, g_.add_set(single)}});
    if (alts.size() == 1) return std::move(alts[0]);
    const int32_t r = fresh_rule(context, "[]", at);
    g_.rules[static_cast<size_t>(r)].alternatives = std::move(alts);
    return {Element{Element::rule, r}};
  }

  // A repeated expression that can match nothing would make `*` loop without consuming: refused with its place.
  void check_repeats() {
    const std::vector<uint8_t> nullable = nullable_rules(g_.rules);
    for (const Repeat& rep : repeats_) {
      const Seq& body = g_.rules[static_cast<size_t>(rep.rule)].alternatives[0];
      bool empty_ok = true;
      for (size_t k = 0; k + 1 < body.size(); ++k)
        if (body[k].kind == Element::bytes || !nullable[static_cast<size_t>(body[k].index)]) { empty_ok = false; break; }
      if (empty_ok)
        fail(std::string("the expression repeated by '") + rep.op +
             "' can match the empty string (e.g. (x?)*); make it match at least one character", rep.offset);
    }
  }

  std::string_view s_;
  std::string what_;
  size_t i_ = 0;
  Grammar g_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<uint8_t> defined_;
  std::vector<size_t> first_use_;
  std::vector<Repeat> repeats_;
  size_t elements_ = 0;
  int32_t depth_ = 0;  // groups open at the cursor
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& what) { return Parser(text, what).run(); }

}  // namespace engine::grammar
