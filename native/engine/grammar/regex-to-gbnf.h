// Regular expressions to GBNF: the ECMAScript flavour that JSON Schema's "pattern" uses and that OpenAI / XGrammar
// users write for regex-guided output. A regex is a regular language, so the translation is exact: literals,
// escapes (\d \D \w \W \s \S \. \n \t \r \f \v \0 \cX \xHH \uHHHH \u{H..}), classes with ranges, negation and
// shorthands, `.` (any character but a line terminator, as in JS without the s flag), groups (capturing,
// (?:...), (?<name>...)), alternation and every quantifier, lazy ones included (the language is the same).
// What a grammar cannot express, or what only makes sense for searching, is refused with
// EngineError(invalid_argument) naming the construct and its byte offset: backreferences, lookaround, \b and \B,
// anchors other than a leading ^ / trailing $, Unicode property escapes, inline flags.
//
// A quantified expression that can match the empty string ((a?)*, (a|)+) is rewritten to the same language
// without that (a*), because GBNF refuses such repetitions. Bounded repetition is expanded by the GBNF parser, so
// bounds above gbnf-parser.h's kMaxRepetition are refused here, where the message can point into the regex.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/gbnf-writer.h"

namespace engine {

enum class RegexAlphabet {
  code_points,          // the grammar matches the text the regex matches
  json_string_content,  // the regex matches a JSON string's decoded value; the grammar matches its escaped spelling
                        // between the quotes (" \ and control characters escaped, the rest written as is)
};

enum class RegexAnchoring {
  whole,   // the whole text must match (what regex-guided output means); a leading ^ and trailing $ are dropped
  search,  // a match anywhere in the text (JSON Schema "pattern"): unanchored sides are padded with any characters
};

struct RegexOptions {
  RegexAlphabet alphabet = RegexAlphabet::code_points;
  RegexAnchoring anchoring = RegexAnchoring::whole;
  // An atom matching any one character of the alphabet, for search-mode padding: "." for code points, the JSON
  // string character rule for json_string_content.
  std::string any_char = ".";
};

struct RegexTranslation {
  gbnf_writer::Expr expr;             // epsilon when the regex matches only the empty string
  uint64_t min_length = 0;            // in code points of the matched (decoded) text
  std::optional<uint64_t> max_length; // nullopt: unbounded
};

// The json_string_content spelling of one code point ("\\\"" for ", "\\n" for a newline, "\\u001b", "a") and
// of a set of them (the set's characters that JSON escapes spelled escaped, the others as themselves).
gbnf_writer::Expr json_content_char(uint32_t cp);
gbnf_writer::Expr json_content_chars(const gbnf_writer::CodePointSet& set);

// The expression for `regex` (inline: a regex needs no rules of its own). Throws EngineError(invalid_argument)
// "regex: unsupported lookahead \"(?=\" at offset 3 in \"abc(?=d)\"".
RegexTranslation translate_regex(std::string_view regex, const RegexOptions& options = {});

// Appends `rule_name ::= <expression matching exactly the whole-string language of regex>` to rules_out and
// returns rule_name (anchors ^ / $ at the ends are accepted and dropped).
std::string regex_to_gbnf(std::string_view regex, const std::string& rule_name, std::string& rules_out);

}  // namespace engine
