// The one JSON text layout structured output generates, and the fixed GBNF rules for its unconstrained parts.
// Compact and deterministic: {"a": 1, "b": [1, 2]} — ", " between members and items, ": " after keys, no other
// whitespace. A small model finishes sooner when it never has to choose whitespace, and every grammar the
// front-ends write (json-schema-to-gbnf.h) uses these separators, so const / enum values are serialized the same way.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf-writer.h"
#include "loading/json.h"

namespace engine::json_layout {

constexpr const char* kItemSeparator = ", ";  // between array items and between object members
constexpr const char* kKeySeparator = ": ";   // between a key and its value

// A value in the layout: keys in document order, strings escaped minimally (" \ and control characters; \n and
// friends where JSON has a short form), numbers as integers or the shortest text that reads back the same.
std::string compact(const json::Value& value);
// A string as a JSON string literal, quotes included.
std::string quote(std::string_view utf8);

// The fixed rules, all named json-*: json-value, json-object, json-array, json-string, json-char, json-number,
// json-integer, json-boolean, and one rule per supported string format (json-date, json-time, json-date-time,
// json-email, json-uuid, json-uri: a whole JSON string, quotes included).
constexpr const char* kValue = "json-value";
constexpr const char* kObject = "json-object";
constexpr const char* kArray = "json-array";
constexpr const char* kString = "json-string";
constexpr const char* kChar = "json-char";  // one character of a string's content, escapes included
constexpr const char* kNumber = "json-number";
constexpr const char* kInteger = "json-integer";
constexpr const char* kBoolean = "json-boolean";

// The regex (translate_regex's dialect) a supported "format" stands for; nullptr for other formats.
const char* format_regex(std::string_view format);
// The formats format_regex knows, for messages: "date, time, date-time, email, uuid, uri".
std::string supported_formats();
// The rule name for a supported format: "json-date-time".
std::string format_rule(std::string_view format);

// Defines the json-* rules in `used`, and those they refer to, in a fixed order after the schema's own rules.
void define_rules(const std::set<std::string>& used, gbnf_writer::RuleSet& rules);

}  // namespace engine::json_layout
