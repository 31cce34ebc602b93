#include "grammar/json-layout.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "grammar/regex-to-gbnf.h"

namespace engine::json_layout {
namespace {

struct FixedRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

// RFC 8259 in the compact layout. json-char spells \u escapes of surrogates only as a high + low pair, so a string's
// length in code points (minLength / maxLength) is its number of json-char.
const std::vector<FixedRule>& fixed_rules() {
  static const std::vector<FixedRule> rules = {
      {kValue, "json-object | json-array | json-string | json-number | json-boolean | \"null\"",
       {kObject, kArray, kString, kNumber, kBoolean}},
      {kObject, "\"{\" ( json-string \": \" json-value ( \", \" json-string \": \" json-value )* )? \"}\"", {kString, kValue}},
      {kArray, "\"[\" ( json-value ( \", \" json-value )* )? \"]\"", {kValue}},
      {kString, "\"\\\"\" json-char* \"\\\"\"", {kChar}},
      {kChar,
       "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] "
       "[0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )",
       {}},
      {kNumber, "json-integer ( \".\" [0-9]+ )? ( [eE] [+\\-]? [0-9]+ )?", {kInteger}},
      {kInteger, "\"-\"? ( \"0\" | [1-9] [0-9]* )", {}},
      {kBoolean, "\"true\" | \"false\"", {}},
  };
  return rules;
}

struct Format {
  const char* name;
  const char* regex;
};

// RFC 3339 dates and times, RFC 4122 UUIDs, and what common validators (ajv-formats) accept as email and URI.
const std::vector<Format>& formats() {
  static const std::vector<Format> table = {
      {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
      {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"date-time",
       "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
       "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      // Labels as runs of letters and digits joined by hyphens: one parse per address.
      {"email",
       "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@([A-Za-z0-9]+(-+[A-Za-z0-9]+)*\\.)+"
       "[A-Za-z0-9]+(-+[A-Za-z0-9]+)*"},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      // An absolute URI: a scheme, then RFC 3986's unreserved, reserved and percent-encoded characters.
      {"uri", "[A-Za-z][A-Za-z0-9+.\\-]*:([A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+"},
  };
  return table;
}

void append_escaped(std::string& out, uint32_t cp) {
  switch (cp) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    out += buf;
    return;
  }
  gbnf_writer::append_utf8(out, cp);
}

std::string number_text(const json::Value& v) {
  if (v.is_integer()) return std::to_string(v.as_int64());
  const double d = v.as_number();
  // The shortest text that reads back as the same double: 0.1 stays 0.1, not 0.10000000000000001.
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

}  // namespace

std::string quote(std::string_view utf8) {
  std::string out = "\"";
  for (uint32_t cp : gbnf_writer::decode_utf8(utf8, "json_schema")) append_escaped(out, cp);
  out += '"';
  return out;
}

std::string compact(const json::Value& value) {
  switch (value.type()) {
    case json::Type::null: return "null";
    case json::Type::boolean: return value.as_bool() ? "true" : "false";
    case json::Type::number: return number_text(value);
    case json::Type::string: return quote(value.as_string());
    case json::Type::array: {
      std::string out = "[";
      for (const json::Value& item : value.as_array()) {
        if (out.size() > 1) out += kItemSeparator;
        out += compact(item);
      }
      return out + "]";
    }
    case json::Type::object: {
      std::string out = "{";
      for (const auto& [key, member] : value.as_object()) {
        if (out.size() > 1) out += kItemSeparator;
        out += quote(key) + kKeySeparator + compact(member);
      }
      return out + "}";
    }
  }
  return "null";
}

const char* format_regex(std::string_view format) {
  for (const Format& f : formats())
    if (format == f.name) return f.regex;
  return nullptr;
}

std::string supported_formats() {
  std::string out;
  for (const Format& f : formats()) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::string format_rule(std::string_view format) { return "json-" + std::string(format); }

void define_rules(const std::set<std::string>& used, gbnf_writer::RuleSet& rules) {
  std::set<std::string> needed = used;
  for (bool grew = true; grew;) {
    grew = false;
    for (const FixedRule& r : fixed_rules())
      if (needed.count(r.name))
        for (const char* u : r.uses) grew |= needed.insert(u).second;
  }
  for (const FixedRule& r : fixed_rules())
    if (needed.count(r.name)) rules.define(r.name, gbnf_writer::raw(r.body, gbnf_writer::Expr::Binds::alternation));
  for (const Format& f : formats()) {
    if (!needed.count(format_rule(f.name))) continue;
    RegexOptions options;
    options.alphabet = RegexAlphabet::json_string_content;
    const gbnf_writer::Expr content = translate_regex(f.regex, options).expr;
    rules.define(format_rule(f.name), gbnf_writer::sequence({gbnf_writer::literal("\""), content, gbnf_writer::literal("\"")}));
  }
}

}  // namespace engine::json_layout
