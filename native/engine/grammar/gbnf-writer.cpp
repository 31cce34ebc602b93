#include "grammar/gbnf-writer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "errors.h"

namespace engine::gbnf_writer {

std::vector<uint32_t> decode_utf8(std::string_view text, const std::string& what) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : 4;
    if (extra == 4 || i + extra >= text.size())  // a bad lead byte, or the sequence runs past the end
      throw EngineError(ErrorCode::invalid_argument, what + ": invalid UTF-8 at byte " + std::to_string(i));
    uint32_t cp = extra == 0 ? b : (b & (0x3Fu >> extra));
    for (size_t k = 1; k <= extra; ++k) {
      const auto c = static_cast<uint8_t>(text[i + k]);
      if ((c & 0xC0) != 0x80)
        throw EngineError(ErrorCode::invalid_argument, what + ": invalid UTF-8 at byte " + std::to_string(i));
      cp = (cp << 6) | (c & 0x3F);
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}


// ---- CodePointSet ----

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  merged.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const auto& r : ranges_) {
    if (r.second + 1 < lo) {
      merged.push_back(r);
    } else if (hi + 1 < r.first) {
      if (!placed) merged.emplace_back(lo, hi), placed = true;
      merged.push_back(r);
    } else {
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) merged.emplace_back(lo, hi);
  ranges_ = std::move(merged);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint && (ranges_.empty() || ranges_.back().second < kMaxCodePoint))
    out.ranges_.emplace_back(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) ++i; else ++j;
  }
  return out;
}

CodePointSet CodePointSet::minus(const CodePointSet& other) const { return intersect(other.complement()); }

bool CodePointSet::contains(uint32_t cp) const {
  for (const auto& r : ranges_)
    if (cp >= r.first && cp <= r.second) return true;
  return false;
}

std::optional<uint32_t> CodePointSet::single() const {
  if (ranges_.size() == 1 && ranges_[0].first == ranges_[0].second) return ranges_[0].first;
  return std::nullopt;
}

// ---- escaping ----

namespace {

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, v);
  return buf;
}

// One code point as the parser's escapes spell it; `specials` are the ASCII characters that need a backslash here.
std::string escape_code_point(uint32_t cp, std::string_view specials) {
  if (cp == '\n') return "\\n";
  if (cp == '\r') return "\\r";
  if (cp == '\t') return "\\t";
  if (cp < 0x20 || cp == 0x7F) return "\\x" + hex(cp, 2);
  if (cp < 0x80) {
    const char c = static_cast<char>(cp);
    if (c == '\\' || specials.find(c) != std::string_view::npos) return std::string("\\") + c;
    return std::string(1, c);
  }
  // Non-ASCII as escapes: the grammar text stays ASCII, readable in any terminal and in test goldens.
  if (cp <= 0xFFFF) return "\\u" + hex(cp, 4);
  return "\\U" + hex(cp, 8);
}

std::string quote_literal(std::string_view utf8) {
  std::string out = "\"";
  for (uint32_t cp : decode_utf8(utf8, "grammar literal")) out += escape_code_point(cp, "\"");
  out += '"';
  return out;
}

std::string class_body(const CodePointSet& set) {
  std::string out;
  for (const auto& [lo, hi] : set.ranges()) {
    out += escape_code_point(lo, "[]-^");
    if (hi == lo) continue;
    if (hi > lo + 1) out += '-';
    out += escape_code_point(hi, "[]-^");
  }
  return out;
}

}  // namespace

// ---- expressions ----

Expr raw(std::string text, Expr::Binds binds) {
  Expr e;
  e.text = std::move(text);
  e.binds = binds;
  return e;
}

Expr literal(std::string_view utf8) {
  if (utf8.empty()) return Expr{};
  Expr e = raw(quote_literal(utf8));
  e.literal = std::string(utf8);
  return e;
}

Expr char_class(const CodePointSet& set) {
  if (const auto one = set.single()) {
    std::string s;
    append_utf8(s, *one);
    return literal(s);
  }
  const CodePointSet rest = set.complement();
  if (rest.empty()) return raw(".");
  std::string positive = "[" + class_body(set) + "]";
  std::string negated = "[^" + class_body(rest) + "]";
  if (negated.size() < positive.size()) positive = std::move(negated);
  return raw(std::move(positive));
}

Expr rule_ref(const std::string& name) { return raw(name); }

std::string as_atom(const Expr& e) {
  if (e.binds == Expr::Binds::atom) return e.text;
  return "( " + e.text + " )";
}

Expr sequence(std::vector<Expr> items) {
  std::vector<Expr> parts;
  // A run of adjacent literals is quoted once, when it ends: merging them two at a time quoted the text again for
  // each, quadratic in a long literal (a regex or enum value of 40,000 characters took 10 s).
  std::string run;
  bool running = false;  // parts.back() starts a run of two or more literals, whose text is `run`
  auto end_run = [&]() {
    if (running) parts.back() = literal(run);
    running = false;
  };
  auto push = [&](Expr item) {
    if (item.literal && !parts.empty() && parts.back().literal) {
      if (!running) run = *parts.back().literal;
      running = true;
      run += *item.literal;
      return;
    }
    end_run();
    parts.push_back(std::move(item));
  };
  for (Expr& item : items) {
    if (item.is_epsilon()) continue;
    if (item.binds == Expr::Binds::sequence && !item.parts.empty()) {
      for (Expr& p : item.parts) push(std::move(p));
    } else {
      push(std::move(item));
    }
  }
  end_run();
  if (parts.empty()) return Expr{};
  if (parts.size() == 1) return std::move(parts[0]);
  Expr out;
  out.binds = Expr::Binds::sequence;
  for (const Expr& p : parts) {
    if (!out.text.empty()) out.text += ' ';
    out.text += p.binds == Expr::Binds::alternation ? as_atom(p) : p.text;
  }
  out.parts = std::move(parts);
  return out;
}

Expr alternation(std::vector<Expr> items) {
  bool has_epsilon = false;
  std::vector<Expr> parts;
  for (Expr& item : items) {
    if (item.is_epsilon()) {
      has_epsilon = true;
      continue;
    }
    const bool seen = std::any_of(parts.begin(), parts.end(), [&](const Expr& p) { return p.text == item.text; });
    if (!seen) parts.push_back(std::move(item));
  }
  Expr out;
  if (parts.size() == 1) {
    out = std::move(parts[0]);
  } else if (!parts.empty()) {
    out.binds = Expr::Binds::alternation;
    for (const Expr& p : parts) {
      if (!out.text.empty()) out.text += " | ";
      out.text += p.text;
    }
  }
  return has_epsilon ? optional(std::move(out)) : out;
}

Expr repeat(Expr item, uint64_t min, std::optional<uint64_t> max) {
  if (item.is_epsilon() || (max && *max == 0)) return Expr{};
  if (min == 1 && max && *max == 1) return item;
  std::string suffix;
  if (!max) suffix = min == 0 ? "*" : min == 1 ? "+" : "{" + std::to_string(min) + ",}";
  else if (min == 0 && *max == 1) suffix = "?";
  else if (min == *max) suffix = "{" + std::to_string(min) + "}";
  else suffix = "{" + std::to_string(min) + "," + std::to_string(*max) + "}";
  // A repetition of a repetition reads better grouped: (x?){2} rather than x?{2}.
  std::string base = as_atom(item);
  const char last = base.empty() ? ' ' : base.back();
  if (item.binds == Expr::Binds::atom && !item.literal && (last == '*' || last == '+' || last == '?' || last == '}'))
    base = "( " + base + " )";
  return raw(base + suffix);
}

Expr optional(Expr item) { return repeat(std::move(item), 0, 1); }

// ---- word sets ----

TrieNode::~TrieNode() {
  // The children's children are moved out before each child is destroyed, so no destructor nests another.
  std::vector<std::unique_ptr<TrieNode>> doomed;
  auto adopt = [&doomed](TrieNode& node) {
    for (auto& [cp, child] : node.children)
      if (child) doomed.push_back(std::move(child));
  };
  adopt(*this);
  while (!doomed.empty()) {
    std::unique_ptr<TrieNode> node = std::move(doomed.back());
    doomed.pop_back();
    adopt(*node);
  }
}

void TrieNode::insert(const std::vector<uint32_t>& word) {
  TrieNode* at = this;
  for (uint32_t cp : word) {
    auto& child = at->children[cp];
    if (!child) child = std::make_unique<TrieNode>();
    at = child.get();
  }
  at->terminal = true;
}

Expr fold_trie(const TrieNode& root, const std::function<const TrieNode&(const TrieNode&)>& below,
               const std::function<Expr(const TrieNode&, std::vector<Expr>)>& combine) {
  struct Frame {
    const TrieNode* node;
    std::map<uint32_t, std::unique_ptr<TrieNode>>::const_iterator next;  // the child to fold next
    std::vector<Expr> results;                                           // the children folded so far
  };
  std::vector<Frame> stack;
  stack.push_back(Frame{&root, root.children.begin(), {}});
  for (;;) {
    Frame& f = stack.back();
    if (f.next != f.node->children.end()) {
      const TrieNode& child = below(*f.next->second);
      ++f.next;
      stack.push_back(Frame{&child, child.children.begin(), {}});  // (f is not used past this point)
      continue;
    }
    Expr done = combine(*f.node, std::move(f.results));
    stack.pop_back();
    if (stack.empty()) return done;
    stack.back().results.push_back(std::move(done));
  }
}

namespace {

// The end of the run of single-child, non-terminal nodes that starts at `node` (itself when there is none).
const TrieNode& run_end(const TrieNode& node) {
  const TrieNode* at = &node;
  while (!at->terminal && at->children.size() == 1) at = at->children.begin()->second.get();
  return *at;
}

}  // namespace

Expr word_set(const std::vector<std::vector<uint32_t>>& words, const std::function<Expr(uint32_t)>& spell) {
  TrieNode root;
  for (const auto& word : words) root.insert(word);
  return fold_trie(root, run_end, [&](const TrieNode& node, std::vector<Expr> below) {
    std::vector<Expr> alternatives;
    size_t k = 0;
    for (const auto& [cp, child] : node.children) {
      // A run of single-child, non-terminal nodes is one literal: "january" rather than "j" ("a" ("n" ...)).
      std::vector<Expr> run{spell(cp)};
      for (const TrieNode* at = child.get(); !at->terminal && at->children.size() == 1;
           at = at->children.begin()->second.get())
        run.push_back(spell(at->children.begin()->first));
      run.push_back(std::move(below[k++]));
      alternatives.push_back(sequence(std::move(run)));
    }
    if (node.terminal) alternatives.push_back(Expr{});
    return alternation(std::move(alternatives));
  });
}

// ---- rules ----

std::string sanitize_rule_name(std::string_view hint) {
  constexpr size_t kMaxName = 80;  // deep nesting makes long hints; uniqueness comes from RuleSet, not length
  std::string out;
  for (char c : hint) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (keep) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  if (out.size() > kMaxName) out.resize(kMaxName);
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.empty()) return "rule";
  if (out[0] >= '0' && out[0] <= '9') out = "n" + out;
  return out;
}

std::string RuleSet::reserve(std::string_view hint) {
  const std::string base = sanitize_rule_name(hint);
  std::string name = base;
  for (int k = 2; has(name); ++k) name = base + "-" + std::to_string(k);
  rules_.emplace_back(name, std::nullopt);
  return name;
}

void RuleSet::release(const std::string& name) {
  rules_.erase(std::remove_if(rules_.begin(), rules_.end(), [&](const auto& r) { return r.first == name; }),
               rules_.end());
}

void RuleSet::define(const std::string& name, const Expr& body) {
  // GBNF has no atom for the empty string, but an empty literal reads as one.
  const std::string text = body.is_epsilon() ? "\"\"" : body.text;
  for (auto& r : rules_) {
    if (r.first == name) {
      r.second = text;
      return;
    }
  }
  rules_.emplace_back(name, text);
}

bool RuleSet::has(const std::string& name) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const auto& r) { return r.first == name; });
}

std::string RuleSet::text() const {
  std::string out;
  for (const auto& [name, body] : rules_)
    if (body) out += name + " ::= " + *body + "\n";
  return out;
}

}  // namespace engine::gbnf_writer
