// The text front-ends of structured output, as text: regex_to_gbnf and json_schema_to_gbnf against golden GBNF,
// every refusal by its message, and the fixture suite (test/fixtures/json-schemas, json-schema-suite.h) compiled and
// read back by the GBNF parser. Which texts the grammars accept is the matcher's test, over the suite's instances.
#include <string>
#include <vector>

#include "check.h"
#include "errors.h"
#include "grammar/gbnf-parser.h"
#include "grammar/json-schema-to-gbnf.h"
#include "grammar/numeric-range-gbnf.h"
#include "grammar/regex-to-gbnf.h"
#include "grammar-test-util.h"
#include "json-schema-suite.h"

using namespace engine;

// The rules a schema made, without the fixed json-* rules every grammar shares (tested once, via json_any_gbnf).
static std::string own_rules(const std::string& gbnf) {
  std::string out;
  size_t at = 0;
  while (at < gbnf.size()) {
    size_t end = gbnf.find('\n', at);
    if (end == std::string::npos) end = gbnf.size();
    if (gbnf.compare(at, 5, "json-") != 0) out += gbnf.substr(at, end - at + 1);
    at = end + 1;
  }
  return out;
}

static std::string schema_rules(const char* schema) { return own_rules(json_schema_to_gbnf(std::string_view(schema))); }

static std::string regex_rule(const char* regex) {
  std::string rules;
  CHECK(regex_to_gbnf(regex, "r", rules) == "r");
  return rules;
}

static bool parses(const std::string& gbnf) {
  try {
    grammar::parse_gbnf(gbnf, "test");
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_gbnf: %s\n", e.what());
    return false;
  }
}

#define CHECK_TEXT(actual, expected)                                                                 \
  do {                                                                                               \
    const std::string a_ = (actual), e_ = (expected);                                                \
    CHECK_MSG(a_ == e_, "\n  got:      %s\n  expected: %s", a_.c_str(), e_.c_str());               \
  } while (0)

static void test_regex_golden() {
  CHECK_TEXT(regex_rule("^\\d{5}(-\\d{4})?$"), "r ::= [0-9]{5} ( \"-\" [0-9]{4} )?\n");
  CHECK_TEXT(regex_rule("^(cat|car|dog)$"), "r ::= \"ca\" ( \"r\" | \"t\" ) | \"dog\"\n");  // a trie
  CHECK_TEXT(regex_rule("(a?)*b"), "r ::= \"a\"* \"b\"\n");                  // nullable under * rewritten
  CHECK_TEXT(regex_rule("(a|b?)+c"), "r ::= [ab]* \"c\"\n");
  CHECK_TEXT(regex_rule("(?:x?y?){2,3}"), "r ::= ( \"x\" \"y\"? | \"y\" ){0,3}\n");
  CHECK_TEXT(regex_rule("a+?b*?c??"), "r ::= \"a\"+ \"b\"* \"c\"?\n");     // lazy: the same language
  CHECK_TEXT(regex_rule("."), "r ::= [^\\n\\r\\u2028\\u2029]\n");
  CHECK_TEXT(regex_rule("[^]"), "r ::= .\n");
  CHECK_TEXT(regex_rule("[\\w-]+@(?<host>\\w+)\\.com"), "r ::= [\\-0-9A-Z_a-z]+ \"@\" [0-9A-Z_a-z]+ \".com\"\n");
  CHECK_TEXT(regex_rule("a\"b\\\\\\n\\x41\\u00e9\\u{1F600}"), "r ::= \"a\\\"b\\\\\\nA\\u00e9\\U0001f600\"\n");
  CHECK_TEXT(regex_rule("\\uD83D\\uDE00"), "r ::= \"\\U0001f600\"\n");    // a surrogate pair is one code point
  CHECK_TEXT(regex_rule("a{,3}}"), "r ::= \"a{,3}}\"\n");                    // not quantifiers: literals (as in JS)
  CHECK_TEXT(regex_rule(""), "r ::= \"\"\n");
  CHECK_TEXT(regex_rule("^a|b$"), "r ::= [ab]\n");

  // JSON string content: the regex constrains the decoded value, the grammar writes it escaped.
  RegexOptions json;
  json.alphabet = RegexAlphabet::json_string_content;
  CHECK_TEXT(translate_regex("a\"\\\\\\n", json).expr.text, "\"a\\\\\\\"\\\\\\\\\\\\n\"");
  CHECK_TEXT(translate_regex("[\\t-\\n\"]", json).expr.text, "\"\\\\\" [\"nt]");
  CHECK_TEXT(translate_regex("[^a]", json).expr.text,
             "[^\\x00-\\x1f\"\\\\a] | \"\\\\\" ( [\"\\\\bfnrt] | \"u00\" ( \"0\" [0-7BEFbef] | \"1\" [0-9A-Fa-f] ) )");
  // Search (JSON Schema "pattern"): unanchored sides padded with any characters.
  json.anchoring = RegexAnchoring::search;
  json.any_char = "json-char";
  CHECK_TEXT(translate_regex("ab", json).expr.text, "json-char* \"ab\" json-char*");
  CHECK_TEXT(translate_regex("^ab", json).expr.text, "\"ab\" json-char*");
  CHECK_TEXT(translate_regex("^a$|b", json).expr.text, "\"a\" | json-char* \"b\" json-char*");
  CHECK_TEXT(translate_regex("x*", json).expr.text, "json-char*");  // matches somewhere in every text

  const RegexTranslation t = translate_regex("^[0-9]{3}(-[0-9]{2,4})?$");
  CHECK(t.min_length == 3 && t.max_length && *t.max_length == 8);
  CHECK(!translate_regex("a+").max_length);
}

static void test_regex_errors() {
  std::string out;
  CHECK_THROWS(regex_to_gbnf("abc(?=d)", "r", out), "regex: unsupported lookahead \"(?=\" at offset 3 in \"abc(?=d)\"");
  CHECK_THROWS(regex_to_gbnf("a(?!b)", "r", out), "unsupported lookahead \"(?!\" at offset 1");
  CHECK_THROWS(regex_to_gbnf("(?<=a)b", "r", out), "unsupported lookbehind \"(?<=\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("(?<!a)b", "r", out), "unsupported lookbehind \"(?<!\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("(a)\\1", "r", out), "unsupported backreference \"\\1\" at offset 3");
  CHECK_THROWS(regex_to_gbnf("(?<x>a)\\k<x>", "r", out), "unsupported backreference \"\\k\" at offset 7");
  CHECK_THROWS(regex_to_gbnf("\\bword", "r", out), "unsupported word boundary \"\\b\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("a\\B", "r", out), "unsupported word boundary \"\\B\" at offset 1");
  CHECK_THROWS(regex_to_gbnf("a^b", "r", out), "anchor \"^\" in the middle at offset 1");
  CHECK_THROWS(regex_to_gbnf("a$b", "r", out), "anchor \"$\" in the middle at offset 1");
  CHECK_THROWS(regex_to_gbnf("(^a)", "r", out), "anchor \"^\" in the middle at offset 1");
  CHECK_THROWS(regex_to_gbnf("(ab", "r", out), "unbalanced parenthesis \"(\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("ab)", "r", out), "unbalanced parenthesis \")\" at offset 2");
  CHECK_THROWS(regex_to_gbnf("[ab", "r", out), "unbalanced bracket \"[\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("x[z-a]", "r", out), "bad range \"z-a\" at offset 2");
  CHECK_THROWS(regex_to_gbnf("[\\d-z]", "r", out), "bad range \"\\d-z\" at offset 1");
  CHECK_THROWS(regex_to_gbnf("a{3,1}", "r", out), "bad quantifier \"{3,1}\" at offset 1");
  CHECK_THROWS(regex_to_gbnf("a{1001}", "r", out), "repetition bound 1001 in \"{1001}\" above 1000 at offset 1");
  CHECK_THROWS(regex_to_gbnf("((a{100}){100}){100}", "r", out), "expand to more than 100000 grammar elements");
  CHECK_THROWS(regex_to_gbnf("*a", "r", out), "nothing to repeat: quantifier \"*\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("a**", "r", out), "nothing to repeat: quantifier \"*\" after a quantifier at offset 2");
  CHECK_THROWS(regex_to_gbnf("\\p{L}", "r", out), "unsupported Unicode property escape \"\\p\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("(?i)abc", "r", out), "unsupported group \"(?i\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("a[]", "r", out), "empty class \"[]\" at offset 1");
  CHECK_THROWS(regex_to_gbnf("\\q", "r", out), "unknown escape \"\\q\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("\\x4", "r", out), "malformed escape \"\\xHH\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("\\01", "r", out), "unsupported octal escape \"\\01\" at offset 0");
  CHECK_THROWS(regex_to_gbnf("ab\\", "r", out), "trailing backslash \"\\\" at offset 2");
  CHECK_THROWS(regex_to_gbnf("a\xff", "r", out), "regex: invalid UTF-8 at byte 1");
  CHECK(out.empty());  // nothing appended on failure
}

static void test_numeric_ranges() {
  CHECK_TEXT(integer_range_gbnf(0, 120).text, "[0-9] | [1-9] [0-9] | \"1\" ( [01] [0-9] | \"20\" )");
  CHECK_TEXT(integer_range_gbnf(-5, 5).text, "[0-5] | \"-\" [1-5]");
  CHECK_TEXT(integer_range_gbnf(1, std::nullopt).text, "[1-9] [0-9]*");
  CHECK_TEXT(integer_range_gbnf(std::nullopt, -10).text, "\"-\" [1-9] [0-9]+");
  CHECK_TEXT(integer_range_gbnf(25, 1234).text,
             "\"2\" [5-9] | [3-9] [0-9] | [1-9] [0-9]{2} | \"1\" ( [01] [0-9]{2} | \"2\" ( [0-2] [0-9] | \"3\" [0-4] ) )");
  // Output grows with digits, not with the width: the full int64-ish range stays small.
  CHECK(integer_range_gbnf(-kMaxRangeBound, kMaxRangeBound).text.size() < 400);

  CHECK_TEXT(decimal_range_gbnf(DecimalBound{0, false}, DecimalBound{1, true})->text, "\"0\" ( \".\" [0-9]+ )?");
  CHECK_TEXT(decimal_range_gbnf(DecimalBound{0, true}, DecimalBound{1, false})->text,
             "\"1\" ( \".\" \"0\"+ )? | \"0.\" \"0\"* [1-9] [0-9]*");
  CHECK_TEXT(decimal_range_gbnf(DecimalBound{-1, false}, DecimalBound{0, false})->text,
             "\"0\" ( \".\" \"0\"+ )? | \"-\" ( \"1\" ( \".\" \"0\"+ )? | \"0.\" \"0\"* [1-9] [0-9]* )");  // never "-0"
  CHECK(!decimal_range_gbnf(DecimalBound{1, true}, DecimalBound{1, false}));  // (1, 1]: nothing
}

static void test_schema_golden() {
  // Required first: one line, optional members as optional suffixes, in "properties" order.
  CHECK_TEXT(schema_rules(R"({"type": "object", "properties": {"name": {"type": "string"},
             "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name"]})"),
             "root ::= \"{\\\"name\\\": \" json-string ( \", \\\"age\\\": \" ( [0-9] | [1-9] [0-9] | \"1\" ( [01] [0-9] | "
             "\"20\" ) ) )? \"}\"\n");
  // All optional: the first member present decides the alternative, then a chain of optional suffixes.
  CHECK_TEXT(schema_rules(R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"},
             "c": {"type": "boolean"}}})"),
             "root ::= \"{\" ( \"\\\"a\\\": \" json-string ( \", \\\"b\\\": \" json-number )? root-after-b | \"\\\"b\\\": \" "
             "json-number root-after-b | \"\\\"c\\\": \" json-boolean )? \"}\"\n"
             "root-after-b ::= ( \", \\\"c\\\": \" json-boolean )?\n");
  CHECK_TEXT(schema_rules(R"({"enum": ["jan", "jun", "jul", "feb"]})"),
             "root ::= \"\\\"\" ( \"feb\\\"\" | \"j\" ( \"an\\\"\" | \"u\" ( \"l\\\"\" | \"n\\\"\" ) ) )\n");
  CHECK_TEXT(schema_rules(R"({"const": {"v": [1, "x"], "ok": true}})"), "root ::= \"{\\\"v\\\": [1, \\\"x\\\"], \\\"ok\\\": true}\"\n");
  CHECK_TEXT(schema_rules(R"({"type": "string", "nullable": true, "maxLength": 3})"),
             "root ::= \"\\\"\" json-char{0,3} \"\\\"\" | \"null\"\n");
  CHECK_TEXT(schema_rules(R"({"type": ["string", "null"]})"), "root ::= json-string | \"null\"\n");
  CHECK_TEXT(schema_rules(R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]})"),
             "root ::= json-string | [1-9] [0-9]*\n");
  // Recursion: one rule per referenced definition.
  CHECK_TEXT(schema_rules(R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
             "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value", "children"]}},
             "$ref": "#/$defs/node"})"),
             "root ::= def-node\n"
             "def-node ::= \"{\\\"value\\\": \" json-integer \", \\\"children\\\": [\" ( def-node ( \", \" def-node )* )? \"]}\"\n");
  CHECK_TEXT(schema_rules(R"({"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 3})"),
             "root ::= \"[\\\"\" [a-z]+ \"\\\"\" ( \", \\\"\" [a-z]+ \"\\\"\" ){0,2} \"]\"\n");
  CHECK_TEXT(schema_rules(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})"),
             "root ::= \"[\" ( json-integer ( \", \" json-string )? )? \"]\"\n");
  CHECK_TEXT(schema_rules(R"({"type": "object", "additionalProperties": {"type": "integer"}})"),
             "root ::= \"{\" ( json-string \": \" json-integer ( \", \" json-string \": \" json-integer )* )? \"}\"\n");
  // Extra members may not reuse a declared key: "id" is refused as an extra key, "i" and "idx" are not.
  CHECK_TEXT(schema_rules(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
             "additionalProperties": true})"),
             "root ::= \"{\\\"id\\\": \" json-integer ( \", \" root-extra-key \": \" json-value )* \"}\"\n"
             "root-extra-key ::= \"\\\"\" ( \"i\" ( \"d\" ( [^\\x00-\\x1f\"\\\\] | \"\\\\\" ( [\"\\\\bfnrt] | \"u00\" ( \"0\" "
             "[0-7BEFbef] | \"1\" [0-9A-Fa-f] ) ) ) json-char* | ( [^\\x00-\\x1f\"\\\\d] | \"\\\\\" ( [\"\\\\bfnrt] | "
             "\"u00\" ( \"0\" [0-7BEFbef] | \"1\" [0-9A-Fa-f] ) ) ) json-char* )? | ( [^\\x00-\\x1f\"\\\\i] | \"\\\\\" ( "
             "[\"\\\\bfnrt] | \"u00\" ( \"0\" [0-7BEFbef] | \"1\" [0-9A-Fa-f] ) ) ) json-char* )? \"\\\"\"\n");
  // JSON Schema's pattern matches anywhere unless anchored.
  CHECK_TEXT(schema_rules(R"({"type": "string", "pattern": "ab"})"), "root ::= \"\\\"\" json-char* \"ab\" json-char* \"\\\"\"\n");
  CHECK_TEXT(schema_rules(R"({"type": "number", "minimum": 0, "exclusiveMaximum": 1})"), "root ::= \"0\" ( \".\" [0-9]+ )?\n");
  CHECK_TEXT(schema_rules(R"({"type": "string", "format": "date"})"),
             "root ::= json-date\n");
  CHECK_TEXT(schema_rules(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
             {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]})"),
             "root ::= \"{\\\"a\\\": \" json-string \", \\\"b\\\": \" json-boolean \"}\"\n");
  CHECK_TEXT(schema_rules(R"({"title": "t", "description": "d", "default": 1, "examples": [1], "$schema": "x", "$id": "y",
             "$comment": "c", "strict": true, "deprecated": false, "readOnly": true, "writeOnly": false, "type": "integer"})"),
             "root ::= json-integer\n");
  CHECK_TEXT(schema_rules("{}"), "root ::= json-value\n");
  CHECK_TEXT(schema_rules("true"), "root ::= json-value\n");
  CHECK_TEXT(schema_rules(R"({"type": "object"})"), "root ::= json-object\n");

  // The fixed rules, once.
  CHECK_TEXT(json_any_gbnf(true),
             "root ::= json-object\n"
             "json-value ::= json-object | json-array | json-string | json-number | json-boolean | \"null\"\n"
             "json-object ::= \"{\" ( json-string \": \" json-value ( \", \" json-string \": \" json-value )* )? \"}\"\n"
             "json-array ::= \"[\" ( json-value ( \", \" json-value )* )? \"]\"\n"
             "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"
             "json-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] "
             "[0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )\n"
             "json-number ::= json-integer ( \".\" [0-9]+ )? ( [eE] [+\\-]? [0-9]+ )?\n"
             "json-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n"
             "json-boolean ::= \"true\" | \"false\"\n");
  CHECK(json_any_gbnf(false).rfind("root ::= json-value\n", 0) == 0);
  CHECK(parses(json_any_gbnf(false)) && parses(json_any_gbnf(true)));
  // Every format rule parses.
  for (const char* format : {"date", "time", "date-time", "email", "uuid", "uri"})
    CHECK(parses(json_schema_to_gbnf(std::string_view(std::string(R"({"type": "string", "format": ")") + format + "\"}"))));
}

// Error paths not covered by the refused-schema fixtures (test_refused_fixtures).
static void test_schema_errors() {
  auto compile = [](const char* schema) { return json_schema_to_gbnf(std::string_view(schema)); };
  CHECK_THROWS(compile("[1, 2"), "json_schema: invalid JSON: ");
  CHECK_THROWS(compile("5"), "json_schema: a schema must be an object or a boolean, got 5 at the root");
  CHECK_THROWS(compile(R"({"properties": {"a": 1}})"), "a schema must be an object or a boolean, got 1 at /properties/a");
  CHECK_THROWS(compile(R"({"properties": {"a/b": {"patternProperties": {}}}})"), "unsupported keyword \"patternProperties\" at /properties/a~1b");
  CHECK_THROWS(compile(R"({"type": []})"), "\"type\" must be a string or an array of strings, got [] at the root");
  CHECK_THROWS(compile(R"({"type": ["string", 1]})"), "\"type\" must be a string or an array of strings, got [\"string\", 1]");
  CHECK_THROWS(compile(R"({"type": "string", "nullable": "yes"})"), "\"nullable\" must be a boolean, got \"yes\"");
  CHECK_THROWS(compile(R"({"properties": 3})"), "\"properties\" must be an object, got 3");
  CHECK_THROWS(compile(R"({"type": "object", "required": "a"})"), "\"required\" must be an array of strings, got \"a\"");
  CHECK_THROWS(compile(R"({"type": "object", "additionalProperties": 1})"), "\"additionalProperties\" must be a boolean or a schema, got 1");
  CHECK_THROWS(compile(R"({"type": "object", "properties": {"a": false}, "required": ["a"]})"),
               "required property \"a\" has the schema false at /properties/a");
  CHECK_THROWS(compile(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})"),
               "required property \"b\" is not in \"properties\" and additionalProperties is absent");
  CHECK_THROWS(compile(R"({"anyOf": [false, false]})"), "every branch of \"anyOf\" is false at the root");
  CHECK_THROWS(compile(R"({"anyOf": []})"), "\"anyOf\" must be a non-empty array of schemas, got []");
  CHECK_THROWS(compile(R"({"anyOf": [{}], "oneOf": [{}]})"), "\"anyOf\" together with \"oneOf\" is not supported");
  CHECK_THROWS(compile(R"({"allOf": {}})"), "\"allOf\" must be a non-empty array of schemas, got {}");
  CHECK_THROWS(compile(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"), "the merged schemas have no \"type\" in common");
  CHECK_THROWS(compile(R"({"allOf": [{"enum": [1, 2]}, {"enum": [3]}]})"), "\"enum\" lists have no value in common");
  CHECK_THROWS(compile(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"properties": {"b": {}}}]})"),
               "\"additionalProperties\" of one applies to property \"b\" of another");
  CHECK_THROWS(compile(R"({"$ref": 5})"), "\"$ref\" must be a string, got 5");
  CHECK_THROWS(compile(R"({"$ref": "#anchor"})"), "unresolvable $ref \"#anchor\" at the root: anchors are not supported");
  CHECK_THROWS(compile(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"), "$ref \"#\" can begin with itself before any text");
  CHECK_THROWS(compile(R"({"type": "array", "maxItems": 1, "minItems": 2})"), "\"maxItems\" 1 is below \"minItems\" 2");
  CHECK_THROWS(compile(R"({"type": "array", "minItems": -1})"), "\"minItems\" must be a non-negative integer, got -1");
  CHECK_THROWS(compile(R"({"type": "array", "maxItems": 1.5})"), "\"maxItems\" must be a non-negative integer, got 1.5");
  CHECK_THROWS(compile(R"({"type": "array", "maxItems": 5000})"), "\"maxItems\" 5000 is above 1000");
  CHECK_THROWS(compile(R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})"),
               "\"minItems\" 2 is above the 1 prefixItems that items: false allows");
  CHECK_THROWS(compile(R"({"type": "array", "additionalItems": false})"), "\"additionalItems\" without \"items\" as an array");
  CHECK_THROWS(compile(R"({"type": "string", "minLength": 3, "maxLength": 2})"), "\"maxLength\" 2 is below \"minLength\" 3");
  CHECK_THROWS(compile(R"({"type": "string", "pattern": 5})"), "\"pattern\" must be a string, got 5");
  CHECK_THROWS(compile(R"({"type": "string", "pattern": "[0-9]+", "maxLength": 5})"),
               "\"minLength\" / \"maxLength\" together with \"pattern\" at the root");
  CHECK_THROWS(compile(R"({"type": "string", "pattern": "a", "format": "date"})"), "\"pattern\" together with \"format\" is not supported");
  CHECK_THROWS(compile(R"({"type": "integer", "maximum": 1e19})"), "\"maximum\" 1e+19 is beyond +-1e18");
  CHECK_THROWS(compile(R"({"type": "number", "exclusiveMinimum": 3, "maximum": 3})"), "no number lies within the bounds");
  CHECK_THROWS(compile(R"({"type": "number", "maximum": "5"})"), "\"maximum\" must be a number, got \"5\"");
  CHECK_THROWS(compile(R"({"type": "string", "const": 1})"), "no value of \"const\" has the declared \"type\"");
  // A pattern that already implies the length is accepted with it.
  CHECK(parses(compile(R"({"type": "string", "pattern": "^[0-9]{5}$", "minLength": 5, "maxLength": 5})")));
  // Integer bounds may be fractional (rounded inward); so may integer-valued doubles on numbers.
  CHECK_TEXT(schema_rules(R"({"type": "integer", "exclusiveMinimum": 0.5, "maximum": 9.9})"), "root ::= [1-9]\n");
  CHECK_TEXT(schema_rules(R"({"type": "number", "minimum": 2.0, "maximum": 2})"), "root ::= \"2\" ( \".\" \"0\"+ )?\n");
  // uniqueItems: false constrains nothing, so it is accepted.
  CHECK(parses(compile(R"({"type": "array", "uniqueItems": false})")));
}

// Output stays proportional to the schema.
static void test_sizes() {
  std::string big_enum = "{\"enum\": [";
  for (int i = 0; i < 1000; ++i) big_enum += (i ? ", \"value-" : "\"value-") + std::to_string(i) + "\"";
  const std::string g = json_schema_to_gbnf(std::string_view(big_enum + "]}"));
  CHECK(g.size() < 20000 && parses(g));
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 100; ++i) many += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": {\"type\": \"integer\"}";
  const std::string h = json_schema_to_gbnf(std::string_view(many + "}}"));
  CHECK(h.size() < 20000 && parses(h));
}

// Deep inputs on a thread with a 1 MB stack (grammar-test-util.h): the regex parser and the schema compiler recurse
// per level of nesting, so both cap it well within that stack and refuse past the cap; the checks a schema's $refs
// get, and the tries of its enums and extra keys, are iterative.
static void test_deep_inputs() {
  auto groups = [](int n) {
    return std::string(static_cast<size_t>(n), '(') + "a|b" + std::string(static_cast<size_t>(n), ')') + "*c";
  };
  std::string rules;
  CHECK(parses("root ::= " + regex_to_gbnf(groups(256), "re", rules) + "\n" + rules));
  CHECK_THROWS(regex_to_gbnf(groups(257), "re", rules), "regex: groups nested more than 256 deep at offset 256");
  CHECK_THROWS(regex_to_gbnf(groups(100000), "re", rules), "flatten the pattern");
  // Schemas nested through "items" (a level each) up to the cap, past it, and a chain of 10,000 $refs.
  auto items = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += "{\"items\": ";
    return s + "{\"type\": \"integer\"}" + std::string(static_cast<size_t>(n), '}');
  };
  CHECK(parses(json_schema_to_gbnf(std::string_view(items(127)))));
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(items(128))),
               "json_schema: schemas nested more than 128 deep (each $ref followed counts) at /items/items/");
  std::string refs = "{\"$ref\": \"#/$defs/d0\", \"$defs\": {";
  for (int i = 0; i < 10000; ++i)
    refs += "\"d" + std::to_string(i) + "\": {\"items\": {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) + "\"}}, ";
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(refs + "\"d10000\": {}}}")), "schemas nested more than 128 deep");
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(items(100000))),
               "json_schema: invalid JSON: at byte 2570: nesting deeper than 256 levels");
  // 3,000 definitions compiled one level deep, each able to begin with the one before: the left-recursion check
  // walks that chain; closed into a cycle (d0 able to begin with d50), it refuses it.
  auto leading = [](const std::string& first) {
    std::string s = "{\"anyOf\": [";
    auto ref = [](int i) { return "{\"$ref\": \"#/$defs/d" + std::to_string(i) + "\"}"; };
    for (int i = 0; i <= 3000; ++i) s += (i ? ", " : "") + ref(i);
    s += "], \"$defs\": {\"d0\": " + first;
    for (int i = 1; i <= 3000; ++i)
      s += ", \"d" + std::to_string(i) + "\": {\"anyOf\": [" + ref(i - 1) + ", {\"type\": \"null\"}]}";
    return s + "}}";
  };
  CHECK(parses(json_schema_to_gbnf(std::string_view(leading("{\"type\": \"integer\"}")))));
  const std::string cycle = "{\"anyOf\": [{\"$ref\": \"#/$defs/d50\"}, {\"type\": \"null\"}]}";
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(leading(cycle))),
               "json_schema: $ref \"#/$defs/d0\" can begin with itself before any text (#/$defs/d0 -> #/$defs/d50 -> ");
  // A declared name is kept apart from extra members one nested group a character: capped below the GBNF parser's
  // cap on groups.
  auto keyed = [](size_t length) {
    return "{\"properties\": {\"" + std::string(length, 'k') + "\": {}}, \"additionalProperties\": true}";
  };
  CHECK(parses(json_schema_to_gbnf(std::string_view(keyed(512)))));
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(keyed(513))),
               "json_schema: property name \"kkkkkkkkkkkkkkkkkkkk...\" of 513 characters is longer than 512, the most "
               "that additional properties can be told apart from at the root: shorten it, or set "
               "additionalProperties to false");
  CHECK_THROWS(json_schema_to_gbnf(std::string_view(keyed(1000000))), "of 1000000 characters is longer than 512");
}

static void test_suite() {
  const auto suite = json_schema_suite::load(check::repo_root);
  CHECK_MSG(suite.size() >= 50, "%zu schemas in test/fixtures/json-schemas", suite.size());
  for (const auto& s : suite) {
    std::string gbnf;
    try {
      gbnf = json_schema_to_gbnf(std::string_view(s.schema_text));
    } catch (const std::exception& e) {
      CHECK_MSG(false, "%s: %s", s.name.c_str(), e.what());
      continue;
    }
    CHECK_MSG(gbnf.rfind("root ::= ", 0) == 0, "%s: no root rule first", s.name.c_str());
    CHECK_MSG(parses(gbnf), "%s: the GBNF parser refuses the grammar", s.name.c_str());
    CHECK_MSG(!s.valid.empty(), "%s: no valid instances", s.name.c_str());
  }
}

static void test_refused_fixtures() {
  const auto refused = json_schema_suite::load_refused(check::repo_root);
  CHECK(refused.size() >= 20);
  for (const auto& r : refused) {
    std::string what = "(no error)";
    try {
      json_schema_to_gbnf(std::string_view(r.schema_text));
    } catch (const EngineError& e) {
      what = e.code() == ErrorCode::invalid_argument ? e.what() : "(not invalid_argument) " + std::string(e.what());
    }
    CHECK_MSG(what.find(r.expected_error) != std::string::npos, "%s: expected '%s', got '%s'", r.name.c_str(),
              r.expected_error.c_str(), what.c_str());
  }
}

TEST_MAIN(test_regex_golden(); test_regex_errors(); test_numeric_ranges(); test_schema_golden(); test_schema_errors();
          test_sizes(); grammar::test::on_small_stack(test_deep_inputs); test_suite(); test_refused_fixtures())
