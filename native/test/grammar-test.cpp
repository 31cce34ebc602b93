// The grammar core: GBNF parsing and its errors, the byte-level matcher on whole strings, and the token mask against
// a brute force (every token tried by replaying the output and accepting it) along generated outputs, so the
// precomputed context-independent parts can never drift from what the matcher allows.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "errors.h"
#include "grammar/compiled-grammar.h"
#include "grammar/gbnf-parser.h"
#include "grammar/grammar-matcher.h"
#include "grammar/json-schema-to-gbnf.h"
#include "grammar/regex-to-gbnf.h"
#include "grammar-test-util.h"
#include "json-schema-suite.h"

using namespace engine;
using namespace engine::grammar;

namespace {

// A vocabulary of single bytes (so any string can be spelled) and the multi-byte pieces real tokenizers have,
// plus two special (empty) tokens and a stop token.
std::shared_ptr<TokenVocab> test_vocab(int32_t& stop) {
  std::vector<std::string> t;
  for (int b = 32; b < 127; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  t.push_back("\n");
  for (const char* s : {"{\"", "\":", "\": ", "\", \"", "\"}", "\",", "true", "false", "null", "ing", " the", "the",
                        "ab", "abc", "bc", "12", "123", "0.", "e+", "-1", "}}", "]}", "[{", "\"\"", "\\\"", "\\n",
                        "\"a", "a\"", "\u00e9", "\xc3", "\xa9", "caf\u00e9", "\u65e5\u672c", "x\"y", ", ", "::"})
    t.push_back(s);
  t.push_back("");  // special
  t.push_back("");  // special
  stop = static_cast<int32_t>(t.size());
  t.push_back("");  // the stop token (its text never counts)
  const auto vocab_size = static_cast<int32_t>(t.size() + 3);  // padded past the tokenizer
  return std::make_shared<TokenVocab>(std::move(t), vocab_size);
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf, const std::shared_ptr<TokenVocab>& vocab) {
  return std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, "test"), vocab);
}

// Whether the grammar matches `text` exactly, fed one byte-token at a time.
bool matches(const std::string& gbnf, const std::string& text) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  auto byte_vocab = std::make_shared<TokenVocab>(bytes, 257);
  GrammarMatcher m(compile(gbnf, byte_vocab), {256});
  for (unsigned char c : text)
    if (!m.accept_token(c)) return false;
  return m.can_end();
}

bool bit(const std::vector<uint64_t>& mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }

// Walks `steps` tokens chosen by `rng` among the allowed ones, comparing every step's mask to the brute force.
int compare_masks(const std::string& gbnf, uint32_t seed, int steps) {
  int32_t stop = 0;
  auto vocab = test_vocab(stop);
  auto g = compile(gbnf, vocab);
  GrammarMatcher m(g, {stop});
  std::vector<int32_t> history;
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask;
  int mismatches = 0;
  for (int step = 0; step < steps; ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
      GrammarMatcher fresh(g, {stop});
      for (int32_t h : history) fresh.accept_token(h);
      const bool ok = fresh.accept_token(id);
      if (ok != bit(mask, id)) {
        ++mismatches;
        std::fprintf(stderr, "  mask mismatch at step %d, token %d '%s': brute %d mask %d\n", step, id,
                     vocab->bytes(id).c_str(), ok, !ok);
      }
      if (ok) allowed.push_back(id);
    }
    if (allowed.empty()) break;
    // Prefer continuing over stopping, so outputs get long.
    int32_t pick = allowed[rng() % allowed.size()];
    if (pick == stop && allowed.size() > 1 && rng() % 4 != 0) pick = allowed[(rng() % (allowed.size() - 1))];
    if (pick == stop) break;
    CHECK(m.accept_token(pick));
    history.push_back(pick);
  }
  return mismatches;
}

// `root ::= r0 <after>`, then n rules each referring to the next, `rI ::= <before> rI+1 <rest>`, and `rn ::= <last>`.
std::string chain(int n, const std::string& before, const std::string& rest, const std::string& last,
                  const std::string& after = "") {
  std::string g = "root ::= r0" + after + "\n";
  for (int i = 0; i < n; ++i)
    g += "r" + std::to_string(i) + " ::= " + before + "r" + std::to_string(i + 1) + rest + "\n";
  return g + "r" + std::to_string(n) + " ::= " + last + "\n";
}

// Deep inputs on a thread with a 1 MB stack: every pass over the rules is iterative, so rules nested 100,000 deep
// compile and match there, and what recursion is left (groups in the parser) is capped well within that stack.
void deep_inputs() {
  // rI ::= "a" rI+1 | "b": the crash this guards against (the rule graph's passes recursed per level).
  const std::string deep = chain(100000, "\"a\" ", " | \"b\"", "\"c\"");
  CHECK(compare_masks(deep, 7, 12) == 0);
  CHECK(matches(deep, std::string(100000, 'a') + "c"));
  // Each rule needs the next, so each can finish only once the last can: the fixpoints took a pass per rule.
  const std::string strict = chain(100000, "\"a\" ", "", "\"c\"");
  CHECK(matches(strict, std::string(100000, 'a') + "c"));
  CHECK(!matches(strict, std::string(99999, 'a') + "c"));
  // Each rule may be empty, so the stacks expand through all of them before a byte.
  const std::string nullable = chain(100000, "", " \"a\" | \"\"", "\"c\"", " \"z\"");
  int32_t stop = 0;
  auto vocab = test_vocab(stop);
  GrammarMatcher m(compile(nullable, vocab), {stop});
  auto allowed = [&]() {
    std::vector<uint64_t> mask;
    m.fill_mask(mask);
    std::string out;
    for (int32_t id = 0; id < vocab->vocab_size(); ++id)
      if (bit(mask, id)) out += (id == stop ? "<stop>" : vocab->bytes(id)) + " ";
    return out;
  };
  std::string first = allowed();  // r0 is "a" up to 100,000 times, or "c" then 100,000 "a"
  CHECK_MSG(first == "a c z ", "allowed: %s", first.c_str());
  CHECK(m.accept_token('a' - 32) && m.accept_token('a' - 32));
  first = allowed();
  CHECK_MSG(first == "a z ", "allowed: %s", first.c_str());
  CHECK(m.accept_token('z' - 32) && allowed() == "<stop> ");
  // A million rules pass the grammar's size limit; a left-recursive cycle through 100,000 rules is found.
  CHECK_THROWS(parse_gbnf(chain(1000000, "\"a\" ", " | \"b\"", "\"c\""), "g"),
               "g: the grammar expands to more than 1048576 elements");
  CHECK_THROWS(parse_gbnf(chain(100000, "", " \"a\"", "r0 \"b\" | \"c\""), "g"), "g: rule 'r0' is left-recursive");
  // Groups nest up to the cap, not past it.
  auto nested = [](int n) {
    return "root ::= " + std::string(static_cast<size_t>(n), '(') + "\"a\"" + std::string(static_cast<size_t>(n), ')');
  };
  CHECK(matches(nested(kMaxGroupNesting), "a"));
  CHECK_THROWS(parse_gbnf(nested(kMaxGroupNesting + 1), "ebnf_grammar"),
               "ebnf_grammar: groups ( ... ) nested more than 1000 deep at line 1, column 1010; "
               "give inner groups rules of their own");
  CHECK_THROWS(parse_gbnf(nested(100000), "g"), "groups ( ... ) nested more than 1000 deep");
  // An enum value of a million characters: one long word of a trie, and one long literal.
  const std::string word(1000000, 'e');
  CHECK(matches(json_schema_to_gbnf("{\"enum\": [\"" + word + "\", \"" + word + "f\"]}"), "\"" + word + "f\""));
}

const char* kJsonish = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( pair ( ", " pair )* )? "}"
pair   ::= string ": " value
array  ::= "[" ( value ( ", " value )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
)";

}  // namespace

TEST_MAIN({
  // Whole strings.
  CHECK(matches(R"(root ::= "ab" | "cd")", "ab"));
  CHECK(!matches(R"(root ::= "ab" | "cd")", "ac"));
  CHECK(!matches(R"(root ::= "ab")", "a"));
  CHECK(matches(R"(root ::= [a-c]+ "!")", "abcab!"));
  CHECK(!matches(R"(root ::= [a-c]+ "!")", "!"));
  CHECK(matches(R"(root ::= x{2,3}  x ::= "ab")", "ababab"));
  CHECK(!matches(R"(root ::= x{2,3}  x ::= "ab")", "ab"));
  CHECK(!matches(R"(root ::= x{2,3}  x ::= "ab")", "abababab"));
  CHECK(matches(R"(root ::= "a"{3,})", "aaaaa"));
  CHECK(!matches(R"(root ::= "a"{3,})", "aa"));
  CHECK(matches(R"(root ::= [^a]*)", "bcd\xc3\xa9 \xe6\x97\xa5"));
  CHECK(!matches(R"(root ::= [^a]*)", "bab"));
  CHECK(!matches(R"(root ::= .*)", "\xc3"));          // half a character is not a character
  CHECK(!matches(R"(root ::= .*)", "\xed\xa0\x80"));  // a surrogate is not UTF-8
  CHECK(matches(R"(root ::= [\u00e0-\u00ff]"\n")", "\xc3\xa9\n"));
  CHECK(matches(R"(root ::= "\u65e5" [\U0001F600-\U0001F64F])", "\xe6\x97\xa5\xf0\x9f\x98\x80"));
  CHECK(matches(kJsonish, R"({"a": [1, -2.5e+3, "x\"y"], "b": {"c": null}})"));
  CHECK(!matches(kJsonish, R"({"a": [1, 2,]})"));
  CHECK(matches("# comment\nroot ::= a b # trailing\na ::= \"x\"\nb ::= (\"y\" | \"z\")?", "xz"));
  CHECK(matches("root ::= item (\",\" item)*\nitem ::= [0-9]+", "1,22,333"));

  // Errors name the problem and where it is.
  int32_t stop = 0;
  auto vocab = test_vocab(stop);
  CHECK_THROWS(parse_gbnf("item ::= \"x\"", "ebnf_grammar"), "ebnf_grammar: no `root ::= ...` rule");
  CHECK_THROWS(parse_gbnf("root ::= item", "ebnf_grammar"), "rule 'item' is used but never defined at line 1, column 10");
  CHECK_THROWS(parse_gbnf("root ::= list\nlist ::= list \",\" x | x\nx ::= \"a\"", "g"), "rule 'list' is left-recursive");
  CHECK_THROWS(parse_gbnf("root ::= (\"a\"?)*", "g"), "can match the empty string");
  CHECK_THROWS(parse_gbnf("root ::= \"a\"{3,1}", "g"), "upper bound below its lower bound");
  CHECK_THROWS(parse_gbnf("root ::= \"a\"{1,5000}", "g"), "repetition bound above 1000");
  CHECK_THROWS(parse_gbnf("root ::= \"abc", "g"), "unterminated string literal at line 1, column 10");
  CHECK_THROWS(parse_gbnf("root ::= [z-a]", "g"), "end below its start");
  CHECK_THROWS(parse_gbnf("root ::= (\"a\"", "g"), "expected ')'");
  CHECK_THROWS(parse_gbnf("root ::= \"a\"\nroot ::= \"b\"", "g"), "rule 'root' is defined twice at line 2");
  CHECK_THROWS(parse_gbnf("root ::= a\na ::= a \"x\" | \"y\"", "g"), "rule 'a' is left-recursive");
  CHECK_THROWS(parse_gbnf("root ::= \"b\" | a\na ::= \"x\" a", "g"), "rule 'a' can never finish");
  CHECK_THROWS(parse_gbnf("root ::= \"\\q\"", "g"), "unknown escape '\\q'");
  CHECK_THROWS(parse_gbnf("root ::= @", "g"), "unexpected '@' at line 1, column 10");
  CHECK_THROWS(TokenVocab({"a", "b", "c"}, 2), "describes 3 tokens but the model's vocabulary has 2");

  // A prefix's subtree in the sorted vocabulary ends at the first later token not starting with it (every rank,
  // every depth, against a scan).
  {
    int32_t stop = 0;
    const auto v = test_vocab(stop);
    const auto n = static_cast<int32_t>(v->sorted().size());
    int wrong = 0, checked = 0;
    for (int32_t r = 0; r < n; ++r) {
      const std::string_view t = v->sorted_bytes(r);
      for (size_t d = 1; d <= t.size(); ++d, ++checked) {
        int32_t end = r + 1;
        while (end < n && v->sorted_bytes(end).substr(0, d) == t.substr(0, d)) ++end;
        wrong += v->subtree_end(r, d) != end;
      }
    }
    CHECK_MSG(wrong == 0 && checked > n, "%d of %d subtree ends differ from the scan", wrong, checked);
  }

  // Masks equal the brute force along generated outputs, for grammars with loops, nesting, optional parts,
  // multi-byte characters and tokens that cross rule boundaries.
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    CHECK_MSG(compare_masks(kJsonish, seed, 40) == 0, "json-like grammar, seed %u", seed);
  }
  CHECK(compare_masks(R"(root ::= "a" [bc]* "d" | "ab" "c"? "x")", 3, 12) == 0);
  CHECK(compare_masks(R"(root ::= ("the" | "ing" | [a-z]{1,3} " ")+ "." )", 4, 20) == 0);
  CHECK(compare_masks(R"(root ::= "\"" [^"]* "\"" (", " "\"" [^"]* "\"")*)", 5, 30) == 0);
  CHECK(compare_masks("root ::= t\nt ::= \"[\" (t (\",\" t)*)? \"]\" | [0-9]", 6, 30) == 0);

  // The stop token: allowed exactly where the output may end; after a complete, closed output nothing else is.
  {
    auto g = compile(R"(root ::= "ab" "c"?)", vocab);
    GrammarMatcher m(g, {stop});
    std::vector<uint64_t> mask;
    m.fill_mask(mask);
    CHECK(!bit(mask, stop));
    CHECK(m.accept_token('a' - 32));  // token b - 32 is the byte b
    CHECK(!m.accept_token(stop));
    CHECK(m.accept_token('b' - 32));
    m.fill_mask(mask);
    CHECK(bit(mask, stop) && bit(mask, 'c' - 32) && !bit(mask, 'a' - 32));
    CHECK(m.can_end() && !m.must_end());
    CHECK(m.accept_token('c' - 32));
    CHECK(m.must_end());
    m.fill_mask(mask);
    int allowed = 0;
    for (int32_t id = 0; id < vocab->vocab_size(); ++id) allowed += bit(mask, id);
    CHECK(allowed == 1 && bit(mask, stop));
    CHECK(m.accept_token(stop));
    m.fill_mask(mask);
    allowed = 0;
    for (int32_t id = 0; id < vocab->vocab_size(); ++id) allowed += bit(mask, id);
    CHECK(allowed == 0);
  }

  // The JSON Schema suite through the matcher: every valid instance accepted, every invalid one refused; and the
  // generic JSON guides.
  {
    const auto suite = json_schema_suite::load(check::repo_root);
    CHECK(suite.size() >= 50);
    for (const auto& schema : suite) {
      const std::string gbnf = json_schema_to_gbnf(schema.schema_text);
      for (const std::string& v : schema.valid) CHECK_MSG(matches(gbnf, v), "%s: valid %s refused", schema.name.c_str(), v.c_str());
      for (const std::string& v : schema.invalid) CHECK_MSG(!matches(gbnf, v), "%s: invalid %s accepted", schema.name.c_str(), v.c_str());
    }
    // Masks equal the brute force on schema grammars too (their rules, loops and escapes as generated).
    for (size_t k = 0; k < suite.size(); k += 10)
      CHECK_MSG(compare_masks(json_schema_to_gbnf(suite[k].schema_text), static_cast<uint32_t>(k), 30) == 0, "%s", suite[k].name.c_str());
    CHECK(matches(json_any_gbnf(false), R"([1, {"a": "bé"}, null])"));
    CHECK(matches(json_any_gbnf(true), R"({"a": [true, false]})"));
    CHECK(!matches(json_any_gbnf(true), R"([1])"));
    std::string rules;
    const std::string top = regex_to_gbnf(R"(\(\d{3}\) \d{3}-\d{4})", "re", rules);
    CHECK(matches("root ::= " + top + "\n" + rules, "(555) 123-4567"));
    CHECK(!matches("root ::= " + top + "\n" + rules, "555-123-4567"));
  }

  // Precomputed in rank ranges on several threads, a position's mask is exactly the one walk's (the same accepted
  // tokens and uncertain ranks, in order), for every position of a schema grammar and a loop-heavy one.
  for (const std::string& gbnf : {json_schema_to_gbnf(R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 4},
      "b": {"type": "array", "items": {"type": "number"}}}, "required": ["a"]})"), std::string(kJsonish)}) {
    auto serial = compile(gbnf, vocab), split = compile(gbnf, vocab);
    const auto n = static_cast<int32_t>(serial->grammar().positions().size());
    std::vector<int32_t> all;
    for (int32_t p = 0; p < n; ++p)
      if (serial->grammar().positions()[static_cast<size_t>(p)].kind == Position::bytes) all.push_back(p);
    split->precompute(all, 16);
    int differ = 0;
    for (int32_t p : all) {
      CHECK(split->has_mask(p));
      const PositionMask &a = serial->position_mask(p), &b = split->position_mask(p);
      differ += a.accepted_bits != b.accepted_bits || a.accepted_ids != b.accepted_ids || a.uncertain != b.uncertain;
    }
    CHECK_MSG(differ == 0 && !all.empty(), "%d of %zu positions differ", differ, all.size());
  }

  // Near max_tokens the mask narrows to tokens after which the guide still fits: among the caller's candidates
  // those that fit, plus the tokens spelling a prefix of the shortest completion (here `"}`), which always fit.
  {
    const auto words = std::make_shared<TokenVocab>(std::vector<std::string>{"", "a", "b", "abc", "\"", "}", "\"}", "\"x", "{\"k\": \""}, 9);
    auto g = compile(R"(root ::= "{\"k\": \"" [a-z]* "\"}")", words);
    GrammarMatcher m(g, {0});
    CHECK(m.accept_token(8) && m.accept_token(3));  // {"k": "abc
    CHECK(m.min_bytes_to_end() == 2);
    std::vector<uint64_t> mask;
    m.fill_mask(mask);
    CHECK(bit(mask, 1) && bit(mask, 3) && bit(mask, 4) && bit(mask, 6) && !bit(mask, 5) && !bit(mask, 0));
    CHECK(m.fits_budget(1, 5) && !m.fits_budget(1, 1) && m.fits_budget(4, 1) && m.fits_budget(6, 0));
    std::vector<uint64_t> narrow = mask;
    m.restrict_to_budget(narrow, 1, {1, 3, 2});  // one token may follow: "a", "abc", "b" would not fit
    CHECK(!bit(narrow, 1) && !bit(narrow, 3) && !bit(narrow, 2) && bit(narrow, 4) && bit(narrow, 6));
    narrow = mask;
    m.restrict_to_budget(narrow, 1, {});  // no candidates: the completion's own tokens
    CHECK(!bit(narrow, 1) && !bit(narrow, 3) && bit(narrow, 4) && bit(narrow, 6));
    narrow = mask;
    m.restrict_to_budget(narrow, 0, {1, 6});  // past saving (2 bytes needed, 1 token left): left as it was
    CHECK(narrow == mask);
    narrow = mask;
    m.restrict_to_budget(narrow, 5, {1, 3});  // room enough for "a" and "abc" (candidates); "b" was not asked about
    CHECK(bit(narrow, 1) && bit(narrow, 3) && !bit(narrow, 2) && bit(narrow, 4) && bit(narrow, 6));
  }

  // A rule copied for a later use (rule-cloning.h) before a rule using the first is measured: the measure counts the
  // copy (it read past the rules' tables).
  CHECK(matches("a ::= b b\nroot ::= a a\nb ::= \"x\"", "xxxx"));
  CHECK(!matches("a ::= b b\nroot ::= a a\nb ::= \"x\"", "xxx"));

  test::on_small_stack(deep_inputs);

  // A long output keeps the stack pool small (compaction) and the matcher right.
  {
    auto g = compile(R"(root ::= "[" [0-9]+ ("," [0-9]+)* "]")", vocab);
    GrammarMatcher m(g, {stop});
    bool ok = m.accept_token('[' - 32);
    for (int k = 0; k < 20000; ++k) {
      ok = ok && m.accept_token('1' - 32 + (k % 9));
      if (k % 7 == 6) ok = ok && m.accept_token(',' - 32);
    }
    CHECK(ok && m.accept_token(']' - 32));
    CHECK(m.must_end());
  }
})
