// Writing GBNF text (the dialect gbnf-parser.h reads) from the text front-ends (regex-to-gbnf.h,
// json-schema-to-gbnf.h): escaped literals and character classes, expressions combined with only the parentheses
// they need, shared prefixes factored out of word lists, and rules in a stable order. One place, so every generated
// grammar has one style: one rule per line, adjacent literals merged, non-ASCII written as \u escapes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "utf8.h"

namespace engine::gbnf_writer {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// UTF-8 text as code points. Invalid UTF-8 throws EngineError(invalid_argument) "<what>: invalid UTF-8 at byte N".
std::vector<uint32_t> decode_utf8(std::string_view text, const std::string& what);
using engine::append_utf8;  // utf8.h

// A set of code points: sorted, disjoint, non-adjacent closed ranges.
class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet range(uint32_t lo, uint32_t hi);
  static CodePointSet all() { return range(0, kMaxCodePoint); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // within [0, kMaxCodePoint]
  CodePointSet minus(const CodePointSet& other) const;
  CodePointSet intersect(const CodePointSet& other) const;

  bool empty() const { return ranges_.empty(); }
  bool contains(uint32_t cp) const;
  std::optional<uint32_t> single() const;  // the only member, if there is exactly one
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// A GBNF expression and how tightly it binds, so that combining it adds parentheses only where needed. GBNF has no
// atom for the empty string: an Expr with empty text is epsilon, which the combinators drop or absorb.
struct Expr {
  enum class Binds { alternation, sequence, atom };
  std::string text;
  Binds binds = Binds::atom;
  std::optional<std::string> literal;  // a string literal's UTF-8 value, so that adjacent literals merge
  std::vector<Expr> parts;             // a sequence's items, so that a sequence inside a sequence flattens

  bool is_epsilon() const { return text.empty(); }
};

Expr raw(std::string text, Expr::Binds binds = Expr::Binds::atom);  // text already in GBNF: ".", a fixed rule body
Expr literal(std::string_view utf8);         // "..." escaped; the empty string gives epsilon
Expr char_class(const CodePointSet& set);    // one member: a literal; all: "."; else [..] or [^..], the shorter
Expr rule_ref(const std::string& name);
Expr sequence(std::vector<Expr> items);     // adjacent literals merged, epsilons dropped
Expr alternation(std::vector<Expr> items);  // duplicates dropped; an epsilon alternative makes the rest optional
// item{min,max}; max nullopt = unbounded. An unbounded repeat of a nullable item is the caller's bug (GBNF refuses
// it), so callers normalize first. Written as *, +, ?, {m}, {m,} or {m,n}.
Expr repeat(Expr item, uint64_t min, std::optional<uint64_t> max);
Expr optional(Expr item);
std::string as_atom(const Expr& e);  // the text, parenthesized unless it already binds as an atom

// A trie of words (code point sequences), children in code point order (so output built from it is deterministic).
// Torn down without recursion: one word of a million characters is a chain of a million nodes.
struct TrieNode {
  std::map<uint32_t, std::unique_ptr<TrieNode>> children;
  bool terminal = false;  // a word ends here

  TrieNode() = default;
  TrieNode(const TrieNode&) = delete;
  TrieNode& operator=(const TrieNode&) = delete;
  ~TrieNode();
  void insert(const std::vector<uint32_t>& word);
};

// An expression for every node of a trie, bottom up with an explicit stack (a trie is as deep as its longest word):
// `combine(node, results)` gets, per child in order, the result of `below(child)` — the child itself, or a node
// further down a run the combiner spells out itself.
Expr fold_trie(const TrieNode& root, const std::function<const TrieNode&(const TrieNode&)>& below,
               const std::function<Expr(const TrieNode&, std::vector<Expr>)>& combine);

// Alternatives of words (code point sequences) as a trie, so that words sharing a prefix share its text and the
// matcher decides between them one character at a time: ("ja" ("n" | "r") | "feb"). `spell` writes one code point
// (a literal, or an escaped form for JSON string content). Duplicate words are merged; the empty word makes the
// result optional.
Expr word_set(const std::vector<std::vector<uint32_t>>& words, const std::function<Expr(uint32_t)>& spell);

// A name valid in GBNF ([a-zA-Z_][a-zA-Z0-9_-]*) from any hint: other characters become '-', runs collapse.
std::string sanitize_rule_name(std::string_view hint);

// The rules of one grammar, in the order their names were reserved (so the root, reserved first, is printed first
// and a rule's sub-rules follow it).
class RuleSet {
 public:
  // A unique name derived from `hint` ("root-address", then "root-address-2", ...).
  std::string reserve(std::string_view hint);
  // Gives back a reserved name that was not used (its expression was inlined instead).
  void release(const std::string& name);
  void define(const std::string& name, const Expr& body);
  bool has(const std::string& name) const;
  // "name ::= body\n" for every defined rule.
  std::string text() const;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> rules_;  // name, body once defined
};

}  // namespace engine::gbnf_writer
