// Masks shared between equal grammar positions (position-signature.h), between grammars (mask-store.h) and
// completed from cut walks (compiled-grammar.cpp) are exact: for JSON schemas full of bounded strings and repeated
// properties, regexes, a recursive GBNF and any-JSON, every position's context-independent mask and every step's
// mask along seeded walks are the same with sharing on as with every position walking the vocabulary itself. The
// vocabulary has every single byte (so any text can be spelled) and multi-byte pieces up to 16 bytes that cross
// string ends, keys and punctuation, so the signatures' lookahead horizon is exercised.
#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "grammar/compiled-grammar.h"
#include "grammar/gbnf-parser.h"
#include "grammar/grammar-cache.h"
#include "grammar/grammar-matcher.h"
#include "grammar-test-util.h"

using namespace engine;
using namespace engine::grammar;

namespace {

std::shared_ptr<const TokenVocab> make_vocab(int32_t& stop) {
  std::vector<std::string> t;
  const std::vector<std::string> pieces = {
      "\"", "\",", "\"}", "\", \"", "\": \"", "\": ", "{\"", "\"]", "}, {\"", "}]", "}}", "]}", "[\"", "[{\"",
      "true", "false", "null", "ab", "abc", "abcdef", "abcdefghij", "the", " the", "ing", "name", "\"name\": \"",
      "\", \"k\": \"", "\", \"v\": ", "12", "123", "1234", "0.", ".5", "-1", "e+", "\\\"", "\\n", "\\u00e9", "\\u",
      "\xc3\xa9", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "x\"y", ", ", "::", "(555) ", "555-", " x12", "-en",
      "@ex", ".com", "\"a", "a\"", "aa", "aaaa", "aaaaaaaa", "zz\"", "9\"", "\"\"", "\", \"d\": \"", "\"e\": \"x\"}",
      "e\", \"", "x\"}", "1}, {\"k\": \""};
  for (const auto& p : pieces) t.push_back(p);
  // A string's end and the key after it, after a character or two: what tells copies of one string rule apart by
  // where they are used.
  for (const char* end : {"\", \"b\": \"", "\", \"c\": [", "\", \"e\": ", "\", \"f", "\", \"v\": 1", "\", \"done\": ",
                          "\", \"authors", "\"], \"isbn\"", "\", \"city\": \"", "\", \"zip", "\"}", "\"]"})
    for (const char* before : {"", "a", "9", "ab", "\xc3\xa9"}) t.push_back(std::string(before) + end);
  // Seeded concatenations of two pieces (up to 16 bytes): tokens that run across a string's end into what follows.
  std::mt19937 rng(7);
  for (int n = 0; n < 400; ++n) {
    std::string s = pieces[rng() % pieces.size()] + pieces[rng() % pieces.size()];
    if (s.size() <= 16) t.push_back(s);
  }
  return test::byte_vocab(std::move(t), stop);
}

std::vector<uint64_t> accepted(const PositionMask& m, const TokenVocab& vocab) { return test::accepted_bits(m, vocab); }

const CompiledGrammarOptions kOwnWalks{/*share_equal_positions=*/false, nullptr};
size_t completed_from_cuts = 0;

// shared: the store every grammar of the test shares (as GrammarCache's), so later grammars reuse earlier walks.
void compare_grammar(const std::string& what, const std::string& gbnf, const std::shared_ptr<const TokenVocab>& vocab,
                     int32_t stop, bool expect_sharing, const std::shared_ptr<MaskStore>& store) {
  auto shared = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, what), vocab, CompiledGrammarOptions{true, store});
  auto own = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, what), vocab, kOwnWalks);
  auto batched = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, what), vocab);  // (a store of its own)
  const auto& positions = own->grammar().positions();
  std::vector<int32_t> all;
  for (size_t p = 0; p < positions.size(); ++p)
    if (positions[p].kind == Position::bytes) all.push_back(static_cast<int32_t>(p));
  batched->precompute(all, 16);  // (the executor's path: a batch of positions, walks split in rank ranges)

  // Every position's context-independent mask, lazily and in a batch.
  int differ = 0;
  for (int32_t p : all) {
    const PositionMask& a = shared->position_mask(p);
    const PositionMask& b = batched->position_mask(p);
    const PositionMask& ref = own->position_mask(p);
    const bool same = accepted(a, *vocab) == accepted(ref, *vocab) && a.uncertain == ref.uncertain &&
                      accepted(b, *vocab) == accepted(ref, *vocab) && b.uncertain == ref.uncertain;
    if (!same && differ++ < 5) std::fprintf(stderr, "  %s: position %d's mask differs with sharing\n", what.c_str(), p);
  }
  CHECK_MSG(differ == 0, "%s: %d of %zu positions' masks differ with sharing", what.c_str(), differ, all.size());
  std::printf("%s: %zu positions, %zu vocabulary walks with sharing (%zu completed from cut walks; %zu walks in a "
              "batch), %zu without\n", what.c_str(), all.size(), shared->vocabulary_walks(),
              shared->completed_from_cuts(), batched->vocabulary_walks(), own->vocabulary_walks());
  completed_from_cuts += shared->completed_from_cuts() + batched->completed_from_cuts();
  if (expect_sharing)
    CHECK_MSG(shared->vocabulary_walks() < own->vocabulary_walks(), "%s: nothing shared", what.c_str());

  // Every step's mask along seeded walks, on fresh grammars (positions met in walk order, as in serving).
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    // (every other seed with a store of its own, so positions are met first in walk order)
    auto fresh = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, what), vocab,
                                                   CompiledGrammarOptions{true, seed % 2 ? store : nullptr});
    auto fresh_own = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf, what), vocab, kOwnWalks);
    GrammarMatcher m(fresh, {stop}), r(fresh_own, {stop});
    const auto [steps, mismatches] = test::walk_side_by_side(m, r, stop, seed, 120, /*may_stop=*/true);
    CHECK_MSG(mismatches == 0, "%s seed %u: %d of %d steps' masks differ with sharing", what.c_str(), seed,
              mismatches, steps);
  }
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string from_guide(GuideType type, const std::string& text) {
  GuidedDecodingParams p;
  p.guide_type = type;
  p.guide = text;
  return guide_to_gbnf(p);
}

// Bounded strings (cloned per use), the same object shape repeated as array items, optional properties and an enum.
const char* kBoundedStrings = R"({"type": "object", "properties": {
  "a": {"type": "string", "maxLength": 12},
  "b": {"type": "string", "minLength": 2, "maxLength": 12},
  "c": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
         "k": {"type": "string", "maxLength": 6}, "v": {"type": "integer"}}, "required": ["k", "v"],
         "additionalProperties": false}},
  "d": {"type": "string", "maxLength": 30},
  "e": {"enum": ["x", "yy", "zzz"]},
  "f": {"type": "string", "maxLength": 12}},
  "required": ["a", "b", "c", "d", "e"], "additionalProperties": false})";

// Recursive, with bounded repetitions inside the recursion (copies of rules that refer back to recursive ones).
const char* kRecursive = R"(
root   ::= value
value  ::= object | array | str | num | "true" | "false" | "null"
object ::= "{" ( pair ( ", " pair ){0,3} )? "}"
pair   ::= key ": " value
key    ::= "\"" [a-z]{1,6} "\""
str    ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,10} "\""
array  ::= "[" ( value ( ", " value ){0,3} )? "]"
num    ::= "-"? [0-9]{1,4} ( "." [0-9]{1,3} )?
)";

}  // namespace

TEST_MAIN({
  int32_t stop = 0;
  const auto vocab = make_vocab(stop);
  const auto store = std::make_shared<MaskStore>();
  compare_grammar("bounded strings", from_guide(GuideType::json_schema, kBoundedStrings), vocab, stop, true, store);
  for (const char* fixture : {"09-todo-list.json", "24-book.json", "02-address.json"}) {
    const std::string path = check::repo_root + "/test/fixtures/json-schemas/" + fixture;
    if (!check::exists(path)) return check::skip("no fixture %s", path.c_str());
    compare_grammar(fixture, from_guide(GuideType::json_schema, read(path)), vocab, stop, true, store);
  }
  compare_grammar("phone regex", from_guide(GuideType::regex, R"(\(\d{3}\) \d{3}-\d{4}( x\d{1,5})?)"), vocab, stop, false,
                  store);
  compare_grammar("tag regex", from_guide(GuideType::regex, R"([a-z]{1,8}(-[a-z0-9]{2,8}){0,3}@[a-z]{2,6}\.(com|org))"),
                  vocab, stop, false, store);
  compare_grammar("recursive gbnf", kRecursive, vocab, stop, false, store);
  compare_grammar("any json", from_guide(GuideType::json, ""), vocab, stop, false, store);
  // The same schema again with the store warm: nothing left to walk but what no earlier guide had.
  compare_grammar("bounded strings again", from_guide(GuideType::json_schema, kBoundedStrings), vocab, stop, true, store);
  CHECK_MSG(completed_from_cuts > 0, "no position was completed from a cut walk (that path went untested)");
  // Rules nested 100,000 deep (each refers to the next), on a thread with a 1 MB stack: finding copies of rules
  // must not recurse that deep (a recursive pass overflowed the stack here).
  test::on_small_stack([&] {
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 100000; ++i)
      chain += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " | \"b\"\n";
    chain += "r100000 ::= \"c\"\n";
    CompiledGrammar deep(parse_gbnf(chain, "chain"), vocab, CompiledGrammarOptions{true, nullptr});
    CompiledGrammar deep_own(parse_gbnf(chain, "chain"), vocab, kOwnWalks);
    int32_t first = 0;
    while (deep.grammar().positions()[static_cast<size_t>(first)].kind != Position::bytes) ++first;
    CHECK(accepted(deep.position_mask(first), *vocab) == accepted(deep_own.position_mask(first), *vocab));
  });
})
