#include "grammar/json-schema-to-gbnf.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "errors.h"
#include "grammar/gbnf-writer.h"
#include "grammar/json-layout.h"
#include "grammar/json-schema-merge.h"
#include "grammar/numeric-range-gbnf.h"
#include "grammar/regex-to-gbnf.h"

namespace engine {
namespace {

using gbnf_writer::CodePointSet;
using gbnf_writer::Expr;
using json_schema::child_pointer;
using json_schema::describe_pointer;
namespace layout = json_layout;

// Counts (minItems, maxLength, ...) become bounded repetitions, which the GBNF parser expands.
constexpr uint64_t kMaxCount = 1000;
// An expression this short stays inline in its parent's rule; a longer one gets a rule of its own.
constexpr size_t kMaxInline = 48;
// Subschemas are compiled by recursion, a $ref's definition too where it is first met, about 3 kB of stack a level:
// the nesting is capped where a 1 MB stack holds it with room to spare. The JSON reader's cap (256 levels) is not
// enough: "items" nests a schema a level, and a chain of $refs nests as deep as it is long. Real schemas nest a
// dozen or so.
constexpr int kMaxSchemaNesting = 128;
// additionalProperties besides "properties" writes one nested group per character of each declared name (to keep
// extra members off them), and the GBNF parser caps group nesting (gbnf-parser.h): longer names are refused here.
constexpr size_t kMaxExcludedKey = 512;

// Keywords we implement, beyond the annotations (json_schema::is_annotation).
const std::set<std::string, std::less<>>& supported_keywords() {
  static const std::set<std::string, std::less<>> keywords = {
      "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
      "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
      "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
      "nullable"};
  return keywords;
}

// Why some well-known keywords are refused, for the message.
const char* refusal_hint(std::string_view keyword) {
  if (keyword == "multipleOf") return "a grammar cannot check divisibility";
  if (keyword == "uniqueItems") return "a grammar cannot compare items; only uniqueItems: false is accepted";
  if (keyword == "not") return "a grammar cannot express a complement of a schema";
  if (keyword == "if" || keyword == "then" || keyword == "else") return "write the cases as anyOf branches";
  if (keyword == "patternProperties" || keyword == "propertyNames")
    return "list the properties in \"properties\", or use additionalProperties with a schema";
  if (keyword == "minProperties" || keyword == "maxProperties") return "mark the properties that must be present as required";
  if (keyword == "dependentRequired" || keyword == "dependentSchemas" || keyword == "dependencies")
    return "write the cases as anyOf branches";
  return nullptr;
}

std::string shown(const json::Value& v) {
  std::string s = layout::compact(v);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// "json_schema: <what> at <pointer>[: <what to do>]".
[[noreturn]] void fail(const std::string& message, const std::string& pointer, const std::string& hint = "") {
  throw EngineError(ErrorCode::invalid_argument,
                    "json_schema: " + message + " at " + describe_pointer(pointer) + (hint.empty() ? "" : ": " + hint));
}

enum TypeBit : unsigned {
  kNull = 1, kBoolean = 2, kObject = 4, kArray = 8, kNumber = 16, kInteger = 32, kString = 64, kAllTypes = 127
};

unsigned type_bit(const std::string& name) {
  static const std::map<std::string, unsigned> bits = {{"null", kNull},     {"boolean", kBoolean}, {"object", kObject},
                                                       {"array", kArray},   {"number", kNumber},   {"integer", kInteger},
                                                       {"string", kString}};
  const auto it = bits.find(name);
  return it == bits.end() ? 0 : it->second;
}

bool has_type(const json::Value& v, unsigned types) {
  switch (v.type()) {
    case json::Type::null: return types & kNull;
    case json::Type::boolean: return types & kBoolean;
    case json::Type::object: return types & kObject;
    case json::Type::array: return types & kArray;
    case json::Type::string: return types & kString;
    case json::Type::number:
      if (types & kNumber) return true;
      return (types & kInteger) && (v.is_integer() || std::floor(v.as_number()) == v.as_number());
  }
  return false;
}

// An expression for a schema, and the rules it can begin with before any text (to find left recursion, which the
// matcher cannot run: a $ref cycle through anyOf branches that never reaches a terminal).
struct SchemaExpr {
  Expr expr;
  std::set<std::string> leading;
};

SchemaExpr fixed(const char* rule, std::set<std::string>& used) {
  used.insert(rule);
  return {gbnf_writer::rule_ref(rule), {}};
}

// One member of an object as it is written: its key text, its value, whether it must be present.
struct Member {
  std::string key;
  SchemaExpr value;
  bool required = false;
};

// Compiling recurses, compile -> compile_body -> typed -> object / array / any_of -> compile_to_rule -> compile, once
// per level of nesting (kMaxSchemaNesting). The functions marked noinline keep frames of their own: inlined, a
// helper's locals would sit in every frame of that recursion, and its steps would merge into frames as big as all of
// them. That halves its stack, to about 3 kB a level.
class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json::Value& root) : root_(root) {}

  std::string run() {
    refs_[""] = "root";  // "$ref": "#" is the root rule
    ref_names_["root"] = "#";
    rules_.reserve("root");
    define("root", compile(root_, "", "root"));
    check_left_recursion();
    layout::define_rules(used_, rules_);
    return rules_.text();
  }

 private:
  const json::Value& root_;
  gbnf_writer::RuleSet rules_;
  std::set<std::string> used_;                              // json-* rules referred to
  std::map<std::string, std::string> refs_;                 // JSON pointer -> rule
  std::map<std::string, std::string> ref_names_;            // rule -> the $ref that made it (messages)
  std::map<std::string, std::set<std::string>> leading_;    // rule -> rules it can begin with
  std::deque<json::Value> merged_;                          // schemas made by merging, alive until the end
  int depth_ = 0;                                           // schemas being compiled (compile's recursion)

  void define(const std::string& name, const SchemaExpr& e) {
    rules_.define(name, e.expr);
    leading_[name] = e.leading;
  }

  // The expression inline when short, else a rule of its own named after `hint`.
  SchemaExpr compile_to_rule(const json::Value& schema, const std::string& pointer, const std::string& hint) {
    const std::string name = rules_.reserve(hint);
    SchemaExpr e = compile(schema, pointer, name);
    if (e.expr.text.size() <= kMaxInline) {
      rules_.release(name);
      return e;
    }
    define(name, e);
    return {gbnf_writer::rule_ref(name), {name}};
  }

  // ---- dispatch ----

  SchemaExpr compile(const json::Value& schema, const std::string& pointer, const std::string& name) {
    struct Nested {
      int& depth;
      ~Nested() { --depth; }
    } nested{++depth_};
    if (depth_ > kMaxSchemaNesting) too_deep(pointer);
    if (schema.is_bool()) {
      if (!schema.as_bool()) fail("the schema is false", pointer, "no value is valid there, so nothing can be generated");
      return fixed(layout::kValue, used_);
    }
    if (!schema.is_object()) fail("a schema must be an object or a boolean, got " + shown(schema), pointer);
    check_keywords(schema, pointer);
    SchemaExpr body = compile_body(schema, pointer, name);
    const json::Value* nullable = schema.find("nullable");
    if (nullable && !nullable->is_bool()) fail("\"nullable\" must be a boolean, got " + shown(*nullable), pointer);
    // OpenAPI's nullable: null besides whatever the rest of the schema allows.
    if (nullable && nullable->as_bool()) body.expr = gbnf_writer::alternation({body.expr, gbnf_writer::literal("null")});
    return body;
  }

  [[noreturn]] static void too_deep(const std::string& pointer) {
    fail("schemas nested more than " + std::to_string(kMaxSchemaNesting) + " deep (each $ref followed counts)", pointer,
         "flatten the schema or shorten its chain of $refs");
  }

  [[gnu::noinline]] void check_keywords(const json::Value& schema, const std::string& pointer) {
    for (const auto& [key, value] : schema.as_object()) {
      if (json_schema::is_annotation(key)) continue;
      if (supported_keywords().count(key)) continue;
      if (key == "uniqueItems" && value.is_bool() && !value.as_bool()) continue;  // no constraint
      std::string hint = refusal_hint(key) ? refusal_hint(key) : "";
      if (pointer.empty() && (key == "schema" || key == "name" || key == "json_schema"))
        hint = "this looks like the response_format wrapper; pass the value of its \"schema\" field";
      fail("unsupported keyword \"" + key + "\"", pointer, hint);
    }
  }

  SchemaExpr compile_body(const json::Value& schema, const std::string& pointer, const std::string& name) {
    if (schema.find("allOf")) return compile(all_of(schema, pointer), pointer, name);
    if (const json::Value* ref = schema.find("$ref")) {
      if (!ref->is_string()) fail("\"$ref\" must be a string, got " + shown(*ref), pointer);
      // Draft 2020-12: keywords beside a $ref apply too (draft-07 ignored them). Annotations only: the ref's rule.
      if (!has_constraints(schema, {"$ref", "nullable"})) return ref_rule(ref->as_string(), pointer);
      return compile(merged(resolve(ref->as_string(), pointer), without(schema, {"$ref", "nullable"}), pointer), pointer, name);
    }
    if (schema.find("anyOf") || schema.find("oneOf")) return any_of(schema, pointer, name);
    const unsigned types = declared_types(schema, pointer);
    if (const json::Value* c = schema.find("const")) return values({c}, types, "const", pointer);
    if (const json::Value* e = schema.find("enum")) {
      if (!e->is_array() || e->as_array().empty()) fail("\"enum\" must be a non-empty array, got " + shown(*e), pointer);
      std::vector<const json::Value*> list;
      for (const json::Value& v : e->as_array()) list.push_back(&v);
      return values(list, types, "enum", pointer);
    }
    return typed(schema, types ? types : inferred_types(schema), pointer, name);
  }

  // ---- types ----

  // The "type" keyword as bits; 0 when absent.
  [[gnu::noinline]] static unsigned declared_types(const json::Value& schema, const std::string& pointer) {
    const json::Value* t = schema.find("type");
    if (!t) return 0;
    const std::string at = child_pointer(pointer, "type");
    std::vector<const json::Value*> names;
    if (t->is_string()) names.push_back(t);
    else if (t->is_array() && !t->as_array().empty())
      for (const json::Value& n : t->as_array()) names.push_back(&n);
    else fail("\"type\" must be a string or an array of strings, got " + shown(*t), pointer);
    unsigned bits = 0;
    for (const json::Value* n : names) {
      if (!n->is_string()) fail("\"type\" must be a string or an array of strings, got " + shown(*t), pointer);
      const unsigned b = type_bit(n->as_string());
      if (!b) fail("unknown type \"" + n->as_string() + "\"", at, "expected null, boolean, object, array, number, integer or string");
      bits |= b;
    }
    return bits;
  }

  // Without "type", a schema whose keywords all belong to one kind of value is taken to be of that kind: what the
  // writer of {"properties": {...}} means. One with no such keyword is any value.
  [[gnu::noinline]] static unsigned inferred_types(const json::Value& schema) {
    unsigned bits = 0;
    for (const auto& [key, v] : schema.as_object()) {
      if (key == "properties" || key == "required" || key == "additionalProperties") bits |= kObject;
      if (key == "items" || key == "prefixItems" || key == "additionalItems" || key == "minItems" || key == "maxItems") bits |= kArray;
      if (key == "minLength" || key == "maxLength" || key == "pattern" || key == "format") bits |= kString;
      if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum") bits |= kNumber;
    }
    return bits ? bits : kAllTypes;
  }

  SchemaExpr typed(const json::Value& schema, unsigned types, const std::string& pointer, const std::string& name) {
    if (types == kAllTypes && !has_constraints(schema, {"nullable"})) return fixed(layout::kValue, used_);
    if (types & kNumber) types &= ~kInteger;  // integers are numbers
    // Each alternative starts with text ({, [, ", a digit...), so none can begin with a rule: nothing leads.
    std::vector<Expr> alternatives;
    if (types & kObject) alternatives.push_back(object(schema, pointer, name).expr);
    if (types & kArray) alternatives.push_back(array(schema, pointer, name).expr);
    if (types & kString) alternatives.push_back(string(schema, pointer, name));
    if (types & kInteger) alternatives.push_back(integer(schema, pointer));
    if (types & kNumber) alternatives.push_back(number(schema, pointer));
    if (types & kBoolean) alternatives.push_back(fixed(layout::kBoolean, used_).expr);
    if (types & kNull) alternatives.push_back(gbnf_writer::literal("null"));
    return {gbnf_writer::alternation(std::move(alternatives)), {}};
  }

  // const / enum: the listed values (those of the declared type), serialized in the layout. A trie keeps a long
  // enum cheap to match: values sharing a prefix share its text.
  [[gnu::noinline]]
  SchemaExpr values(const std::vector<const json::Value*>& list, unsigned types, const char* keyword, const std::string& pointer) {
    std::vector<std::vector<uint32_t>> words;
    for (const json::Value* v : list)
      if (!types || has_type(*v, types)) words.push_back(gbnf_writer::decode_utf8(layout::compact(*v), "json_schema"));
    if (words.empty())
      fail(std::string("no value of \"") + keyword + "\" has the declared \"type\"", pointer, "nothing can be generated");
    return {gbnf_writer::word_set(words, [](uint32_t cp) {
              std::string s;
              gbnf_writer::append_utf8(s, cp);
              return gbnf_writer::literal(s);
            }),
            {}};
  }

  // ---- combinators ----

  // Whether the schema has keywords other than annotations, containers and `ignore`.
  static bool has_constraints(const json::Value& schema, std::initializer_list<std::string_view> ignore) {
    for (const auto& [key, v] : schema.as_object()) {
      if (json_schema::is_annotation(key) || key == "$defs" || key == "definitions") continue;
      if (std::find(ignore.begin(), ignore.end(), key) != ignore.end()) continue;
      return true;
    }
    return false;
  }

  // The schema without some keywords (annotations and $defs dropped too), kept alive in merged_.
  [[gnu::noinline]]
  const json::Value& without(const json::Value& schema, std::initializer_list<std::string_view> drop) {
    std::string text = "{";
    for (const auto& [key, v] : schema.as_object()) {
      if (json_schema::is_annotation(key) || key == "$defs" || key == "definitions") continue;
      if (std::find(drop.begin(), drop.end(), key) != drop.end()) continue;
      if (text.size() > 1) text += ", ";
      text += layout::quote(key) + ": " + layout::compact(v);
    }
    merged_.push_back(json::parse(text + "}", "json_schema"));
    return merged_.back();
  }

  [[gnu::noinline]] const json::Value& merged(const json::Value& a, const json::Value& b, const std::string& pointer) {
    const std::string text = json_schema::merge_schemas(
        a, b, pointer, [this](const std::string& ref, const std::string& at) -> const json::Value& { return resolve(ref, at); });
    merged_.push_back(json::parse(text, "json_schema"));
    return merged_.back();
  }

  // allOf: the schema's other keywords and every subschema merged into one (json-schema-merge.h).
  [[gnu::noinline]] const json::Value& all_of(const json::Value& schema, const std::string& pointer) {
    const json::Value& list = *schema.find("allOf");
    if (!list.is_array() || list.as_array().empty()) fail("\"allOf\" must be a non-empty array of schemas, got " + shown(list), pointer);
    const json::Value* acc = &without(schema, {"allOf", "nullable"});
    for (size_t i = 0; i < list.as_array().size(); ++i)
      acc = &merged(*acc, list.as_array()[i], child_pointer(child_pointer(pointer, "allOf"), std::to_string(i)));
    return *acc;
  }

  // anyOf / oneOf: the branches as alternatives, each merged with the keywords beside the list. oneOf is generated
  // as anyOf: a grammar cannot check that exactly one branch matches.
  [[gnu::noinline]] SchemaExpr any_of(const json::Value& schema, const std::string& pointer, const std::string& name) {
    if (schema.find("anyOf") && schema.find("oneOf"))
      fail("\"anyOf\" together with \"oneOf\" is not supported", pointer, "wrap one of them in allOf");
    const char* keyword = schema.find("anyOf") ? "anyOf" : "oneOf";
    const json::Value& list = *schema.find(keyword);
    if (!list.is_array() || list.as_array().empty())
      fail(std::string("\"") + keyword + "\" must be a non-empty array of schemas, got " + shown(list), pointer);
    const bool siblings = has_constraints(schema, {"anyOf", "oneOf", "nullable"});
    const json::Value* rest = siblings ? &without(schema, {"anyOf", "oneOf", "nullable"}) : nullptr;
    std::vector<Expr> alternatives;
    std::set<std::string> leading;
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      const json::Value& branch = list.as_array()[i];
      const std::string at = child_pointer(child_pointer(pointer, keyword), std::to_string(i));
      if (branch.is_bool() && !branch.as_bool()) continue;  // a false branch allows nothing
      const json::Value& effective = rest ? merged(*rest, branch, at) : branch;
      SchemaExpr e = compile_to_rule(effective, at, name + "-" + std::to_string(i + 1));
      alternatives.push_back(std::move(e.expr));
      leading.insert(e.leading.begin(), e.leading.end());
    }
    if (alternatives.empty()) fail(std::string("every branch of \"") + keyword + "\" is false", pointer, "nothing can be generated");
    return {gbnf_writer::alternation(std::move(alternatives)), leading};
  }

  // ---- $ref ----

  // "#", "#/$defs/x", "#/definitions/x" or any other local JSON pointer; %-escapes and ~0 ~1 decoded.
  std::string ref_pointer(const std::string& ref, const std::string& pointer) const {
    if (ref.empty() || ref[0] != '#')
      fail("unresolvable $ref \"" + ref + "\"", pointer, "only local references are supported: \"#\", \"#/$defs/name\", \"#/definitions/name\"");
    std::string out;
    for (size_t i = 1; i < ref.size(); ++i) {
      if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
        out += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += ref[i];
      }
    }
    if (!out.empty() && out[0] != '/') fail("unresolvable $ref \"" + ref + "\"", pointer, "anchors are not supported; use a JSON pointer");
    return out;
  }

  const json::Value& resolve(const std::string& ref, const std::string& pointer) const {
    const std::string target = ref_pointer(ref, pointer);
    const json::Value* at = &root_;
    size_t i = 0;
    while (i < target.size()) {
      size_t next = target.find('/', i + 1);
      if (next == std::string::npos) next = target.size();
      std::string token = target.substr(i + 1, next - i - 1);
      for (size_t k = 0; (k = token.find('~', k)) != std::string::npos; ++k)
        token.replace(k, 2, k + 1 < token.size() && token[k + 1] == '1' ? "/" : "~");
      const json::Value* child = nullptr;
      if (at->is_object()) {
        child = at->find(token);
      } else if (at->is_array() && !token.empty() && std::all_of(token.begin(), token.end(), ::isdigit)) {
        const size_t index = std::stoul(token);
        if (index < at->as_array().size()) child = &at->as_array()[index];
      }
      if (!child) fail("unresolvable $ref \"" + ref + "\"", pointer, "nothing is at that pointer");
      at = child;
      i = next;
    }
    return *at;
  }

  // One rule per referenced schema, made the first time it is referenced, so recursion refers back to it.
  [[gnu::noinline]] SchemaExpr ref_rule(const std::string& ref, const std::string& pointer) {
    const std::string target = ref_pointer(ref, pointer);
    auto it = refs_.find(target);
    if (it != refs_.end()) return {gbnf_writer::rule_ref(it->second), {it->second}};
    const json::Value& schema = resolve(ref, pointer);
    const std::string name = rules_.reserve("def-" + target.substr(target.rfind('/') + 1));
    refs_[target] = name;
    ref_names_[name] = ref;
    define(name, compile(schema, target, name));
    return {gbnf_writer::rule_ref(name), {name}};
  }

  // A rule that can begin with itself loops in the matcher without reading anything: refused, naming the $refs.
  void check_left_recursion() const {
    // Depth first with an explicit path, not recursion: $refs may lead one into the next as far as the schema goes.
    struct Step {
      const std::string* rule;
      std::set<std::string>::const_iterator next, end;  // the rules it can begin with, those left to look at
    };
    static const std::set<std::string> kNone;
    std::map<std::string, int> state;  // 1: on the path, 2: done
    std::vector<Step> path;
    auto enter = [&](const std::string& rule) {
      state[rule] = 1;
      const auto it = leading_.find(rule);
      const std::set<std::string>& leads = it == leading_.end() ? kNone : it->second;
      path.push_back(Step{&rule, leads.begin(), leads.end()});
    };
    for (const auto& [start, unused] : leading_) {
      if (state[start]) continue;
      enter(start);
      while (!path.empty()) {
        Step& step = path.back();
        if (step.next == step.end) {
          state[*step.rule] = 2;
          path.pop_back();
          continue;
        }
        const std::string& next = *step.next++;
        if (state[next] == 2) continue;
        if (state[next] == 1) {
          std::string cycle;
          bool on = false;
          for (const Step& s : path) {
            on = on || *s.rule == next;
            if (on && ref_names_.count(*s.rule)) cycle += (cycle.empty() ? "" : " -> ") + ref_names_.at(*s.rule);
          }
          const auto ref = ref_names_.find(next);
          throw EngineError(ErrorCode::invalid_argument,
                            "json_schema: $ref \"" + (ref == ref_names_.end() ? next : ref->second) +
                                "\" can begin with itself before any text (" + cycle + " -> " +
                                (ref == ref_names_.end() ? next : ref->second) +
                                "): a grammar cannot generate such a left-recursive schema");
        }
        enter(next);
      }
    }
  }

  // ---- objects ----

  [[gnu::noinline]] SchemaExpr object(const json::Value& schema, const std::string& pointer, const std::string& name) {
    const json::Value* props = schema.find("properties");
    const json::Value* required = schema.find("required");
    const json::Value* extra = schema.find("additionalProperties");
    if (props && !props->is_object()) fail("\"properties\" must be an object, got " + shown(*props), pointer);
    if (extra && !extra->is_bool() && !extra->is_object())
      fail("\"additionalProperties\" must be a boolean or a schema, got " + shown(*extra), pointer);
    std::vector<std::string> required_keys;
    if (required) {
      if (!required->is_array()) fail("\"required\" must be an array of strings, got " + shown(*required), pointer);
      for (const json::Value& k : required->as_array()) {
        if (!k.is_string()) fail("\"required\" must be an array of strings, got " + shown(*required), pointer);
        if (std::find(required_keys.begin(), required_keys.end(), k.as_string()) == required_keys.end())
          required_keys.push_back(k.as_string());
      }
    }
    // additionalProperties absent: none beyond "properties" when they are given (the members the caller asked for,
    // and fewer choices for a small model; OpenAI's strict mode requires false anyway), any when they are not.
    const bool extra_allowed = extra ? !(extra->is_bool() && !extra->as_bool()) : props == nullptr;
    if (!props && required_keys.empty() && extra_allowed && (!extra || extra->is_bool())) return fixed(layout::kObject, used_);

    std::optional<SchemaExpr> extra_schema;  // compiled once, for every member it applies to
    auto extra_value = [&]() {
      if (!extra_schema) extra_schema = extra && extra->is_object()
                                            ? compile_to_rule(*extra, child_pointer(pointer, "additionalProperties"), name + "-extra")
                                            : fixed(layout::kValue, used_);
      return *extra_schema;
    };
    std::vector<Member> members;
    std::vector<std::string> declared;
    if (props) {
      for (const auto& [key, sub] : props->as_object()) {
        declared.push_back(key);
        const bool must = std::find(required_keys.begin(), required_keys.end(), key) != required_keys.end();
        const std::string at = child_pointer(child_pointer(pointer, "properties"), key);
        if (sub.is_bool() && !sub.as_bool()) {
          if (must) fail("required property \"" + key + "\" has the schema false", at, "nothing can be generated");
          continue;  // a property that may not appear
        }
        members.push_back({key, compile_to_rule(sub, at, name + "-" + key), must});
      }
    }
    for (const std::string& key : required_keys) {
      if (std::find(declared.begin(), declared.end(), key) != declared.end()) continue;
      if (!extra_allowed)
        fail("required property \"" + key + "\" is not in \"properties\" and additionalProperties is " +
                 (extra ? "false" : "absent (read as false when \"properties\" is given)"), pointer, "add it to \"properties\"");
      members.push_back({key, extra_value(), true});
      declared.push_back(key);
    }
    std::optional<Expr> extra_member;
    if (extra_allowed) {
      const Expr key = declared.empty() ? fixed(layout::kString, used_).expr : key_not_in(declared, name, pointer);
      extra_member = gbnf_writer::sequence({key, gbnf_writer::literal(layout::kKeySeparator), extra_value().expr});
    }
    return {gbnf_writer::sequence({gbnf_writer::literal("{"), members_expr(members, extra_member, name), gbnf_writer::literal("}")}), {}};
  }

  // The members in order, each optional one independently left out, separated by ", ", with no exponential blow-up
  // and one parse per text: the object's first member decides which alternative applies (a chain of optional
  // suffixes). With members m0..mn and the first required one at r:
  //   members   ::= m0 after-m0 | m1 after-m1 | ... | mr after-mr       (what comes first: an optional one, or mr)
  //   after-mi  ::= ( ", " m(i+1) )? after-m(i+1)                      (optional members; required ones without ?)
  // and after-mr written out in full (referred to from one place). Linear in the number of members. Extra members
  // (additionalProperties) come last, any number of them.
  [[gnu::noinline]]
  Expr members_expr(const std::vector<Member>& members, const std::optional<Expr>& extra_member, const std::string& name) {
    const size_t n = members.size();
    auto kv = [&](size_t i) {
      return gbnf_writer::sequence({gbnf_writer::literal(layout::quote(members[i].key) + layout::kKeySeparator), members[i].value.expr});
    };
    auto with_separator = [&](Expr e) { return gbnf_writer::sequence({gbnf_writer::literal(layout::kItemSeparator), std::move(e)}); };
    const Expr extra_tail = extra_member ? gbnf_writer::repeat(with_separator(*extra_member), 0, std::nullopt) : Expr{};
    // The members after i (i+1 .. n-1) written out in full, then the extra members.
    auto flat_after = [&](size_t i) {
      std::vector<Expr> items;
      for (size_t k = i + 1; k < n; ++k)
        items.push_back(members[k].required ? with_separator(kv(k)) : gbnf_writer::optional(with_separator(kv(k))));
      items.push_back(extra_tail);
      return gbnf_writer::sequence(std::move(items));
    };
    size_t first_required = n;
    for (size_t i = 0; i < n; ++i) {
      if (members[i].required) {
        first_required = i;
        break;
      }
    }
    if (n == 0) return extra_member ? gbnf_writer::optional(gbnf_writer::sequence({*extra_member, extra_tail})) : Expr{};
    if (first_required == 0) return gbnf_writer::sequence({kv(0), flat_after(0)});

    // Members 0..last can come first. after[i] follows member i; it is a rule when two places refer to it (the
    // alternative starting with member i, and after[i-1]); after[0] has only the first.
    const size_t last = std::min(first_required, n - 1);
    auto item = [&](size_t k) { return members[k].required ? with_separator(kv(k)) : gbnf_writer::optional(with_separator(kv(k))); };
    std::vector<std::string> rule(last + 1);
    for (size_t i = 1; i <= last; ++i) rule[i] = rules_.reserve(name + "-after-" + members[i].key);  // in reading order
    std::vector<Expr> after(last + 1);
    for (size_t i = last + 1; i-- > 0;) {
      Expr body = i == last ? flat_after(i) : gbnf_writer::sequence({item(i + 1), after[i + 1]});
      if (i == 0 || body.is_epsilon()) {
        if (i > 0) rules_.release(rule[i]);
        after[i] = std::move(body);
        continue;
      }
      rules_.define(rule[i], body);
      after[i] = gbnf_writer::rule_ref(rule[i]);
    }
    std::vector<Expr> alternatives;
    for (size_t i = 0; i <= last; ++i) alternatives.push_back(gbnf_writer::sequence({kv(i), after[i]}));
    if (first_required == n && extra_member) alternatives.push_back(gbnf_writer::sequence({*extra_member, extra_tail}));
    Expr all = gbnf_writer::alternation(std::move(alternatives));
    return first_required == n ? gbnf_writer::optional(std::move(all)) : all;
  }

  // A key (quotes included) that is none of `keys`: extra members may not reuse a declared name, or their value would
  // escape that property's schema. A trie of the keys' characters, where leaving the trie frees the rest:
  //   not-in(node) ::= c1 not-in(child1) | ... | [^c1..] json-char*      (optional when node is not a whole key)
  [[gnu::noinline]]
  Expr key_not_in(const std::vector<std::string>& keys, const std::string& name, const std::string& pointer) {
    gbnf_writer::TrieNode root;
    for (const std::string& key : keys) {
      const std::vector<uint32_t> cps = gbnf_writer::decode_utf8(key, "json_schema");
      if (cps.size() > kMaxExcludedKey) {
        std::string start;
        for (size_t k = 0; k < 20; ++k) gbnf_writer::append_utf8(start, cps[k]);
        fail("property name \"" + start + "...\" of " + std::to_string(cps.size()) + " characters is longer than " +
                 std::to_string(kMaxExcludedKey) + ", the most that additional properties can be told apart from",
             pointer, "shorten it, or set additionalProperties to false");
      }
      root.insert(cps);
    }
    used_.insert(layout::kChar);
    const Expr rest = gbnf_writer::repeat(gbnf_writer::rule_ref(layout::kChar), 0, std::nullopt);
    auto itself = [](const gbnf_writer::TrieNode& child) -> const gbnf_writer::TrieNode& { return child; };
    const std::string rule = rules_.reserve(name + "-extra-key");
    auto combine = [&](const gbnf_writer::TrieNode& node, std::vector<Expr> below) {
      std::vector<Expr> alternatives;
      CodePointSet others = CodePointSet::all();
      size_t k = 0;
      for (const auto& [cp, child] : node.children) {
        alternatives.push_back(gbnf_writer::sequence({json_content_char(cp), std::move(below[k++])}));
        others = others.minus(CodePointSet::range(cp, cp));
      }
      alternatives.push_back(gbnf_writer::sequence({json_content_chars(others), rest}));
      Expr e = gbnf_writer::alternation(std::move(alternatives));
      return node.terminal ? e : gbnf_writer::optional(std::move(e));
    };
    const Expr not_in = gbnf_writer::fold_trie(root, itself, combine);
    rules_.define(rule, gbnf_writer::sequence({gbnf_writer::literal("\""), not_in, gbnf_writer::literal("\"")}));
    return gbnf_writer::rule_ref(rule);
  }

  // ---- arrays ----

  [[gnu::noinline]]
  std::optional<uint64_t> count(const json::Value& schema, const char* key, const std::string& pointer) const {
    const json::Value* v = schema.find(key);
    if (!v) return std::nullopt;
    if (!v->is_number() || !has_type(*v, kInteger) || v->as_number() < 0)
      fail(std::string("\"") + key + "\" must be a non-negative integer, got " + shown(*v), pointer);
    const double d = v->as_number();
    if (d > static_cast<double>(kMaxCount))
      fail(std::string("\"") + key + "\" " + shown(*v) + " is above " + std::to_string(kMaxCount), pointer,
           "bounded repetition is expanded in the grammar; leave it out or lower it");
    return static_cast<uint64_t>(d);
  }

  [[gnu::noinline]] SchemaExpr array(const json::Value& schema, const std::string& pointer, const std::string& name) {
    const json::Value* prefix = schema.find("prefixItems");
    const json::Value* items = schema.find("items");
    const json::Value* additional = schema.find("additionalItems");
    const json::Value* rest_schema = items;
    // draft-07's tuple form: "items" as an array, "additionalItems" for the rest.
    const bool tuple_form = items && items->is_array();
    if (tuple_form) {
      if (prefix) fail("\"items\" as an array together with \"prefixItems\"", pointer, "use prefixItems, and a schema for items");
      prefix = items;
      rest_schema = additional;
    } else if (additional) {
      fail("\"additionalItems\" without \"items\" as an array", pointer, "it belongs to draft-07 tuples; with prefixItems, use \"items\"");
    }
    if (prefix && !prefix->is_array()) fail("\"prefixItems\" must be an array of schemas, got " + shown(*prefix), pointer);
    if (rest_schema && !rest_schema->is_bool() && !rest_schema->is_object())
      fail("\"items\" must be a schema, got " + shown(*rest_schema), pointer);
    const uint64_t min = count(schema, "minItems", pointer).value_or(0);
    std::optional<uint64_t> max = count(schema, "maxItems", pointer);
    if (max && *max < min) fail("\"maxItems\" " + std::to_string(*max) + " is below \"minItems\" " + std::to_string(min), pointer);
    const size_t k = prefix ? prefix->as_array().size() : 0;
    const bool rest_allowed = !(rest_schema && rest_schema->is_bool() && !rest_schema->as_bool());
    if (!rest_allowed) {
      if (min > k) fail("\"minItems\" " + std::to_string(min) + " is above the " + std::to_string(k) + " prefixItems that items: false allows", pointer);
      max = max ? std::min<uint64_t>(*max, k) : k;
    }
    if (k == 0 && min == 0 && !max && (!rest_schema || rest_schema->is_bool())) return fixed(layout::kArray, used_);

    const Expr sep = gbnf_writer::literal(layout::kItemSeparator);
    Expr rest_item;
    if (rest_allowed && (!max || *max > k))
      rest_item = rest_schema && rest_schema->is_object() ? compile_to_rule(*rest_schema, child_pointer(pointer, tuple_form ? "additionalItems" : "items"), name + "-item").expr
                                                           : fixed(layout::kValue, used_).expr;
    // The items after the prefix: between max(0, min - k) and max - k of them.
    const uint64_t rest_min = min > k ? min - k : 0;
    const std::optional<uint64_t> rest_max = max ? std::optional<uint64_t>(*max > k ? *max - k : 0) : std::nullopt;
    Expr tail;
    if (!rest_item.is_epsilon() && (!rest_max || *rest_max > 0)) {
      if (k > 0) {
        tail = gbnf_writer::repeat(gbnf_writer::sequence({sep, rest_item}), rest_min, rest_max);
      } else {
        // No prefix: the first item has no separator before it.
        const Expr more = gbnf_writer::repeat(gbnf_writer::sequence({sep, rest_item}), rest_min > 0 ? rest_min - 1 : 0,
                                              rest_max ? std::optional<uint64_t>(*rest_max - 1) : std::nullopt);
        tail = gbnf_writer::sequence({rest_item, more});
        if (rest_min == 0) tail = gbnf_writer::optional(std::move(tail));
      }
    }
    // The prefix items (those maxItems leaves), nested from the last: [a (, b (, c rest)?)?] where the array may end
    // before item i+1 once i >= minItems items are there.
    std::vector<Expr> prefix_items;
    const size_t kept = std::min<size_t>(k, max ? static_cast<size_t>(*max) : k);
    for (size_t i = 0; i < kept; ++i) {
      const std::string at = child_pointer(child_pointer(pointer, tuple_form ? "items" : "prefixItems"), std::to_string(i));
      prefix_items.push_back(compile_to_rule(prefix->as_array()[i], at, name + "-item-" + std::to_string(i + 1)).expr);
    }
    for (size_t i = kept; i-- > 0;) {
      Expr here = gbnf_writer::sequence({i == 0 ? Expr{} : sep, prefix_items[i], tail});
      tail = i >= min ? gbnf_writer::optional(std::move(here)) : here;
    }
    return {gbnf_writer::sequence({gbnf_writer::literal("["), tail, gbnf_writer::literal("]")}), {}};
  }

  // ---- strings ----

  [[gnu::noinline]] Expr string(const json::Value& schema, const std::string& pointer, const std::string& name) {
    const json::Value* pattern = schema.find("pattern");
    const json::Value* format = schema.find("format");
    const std::optional<uint64_t> min = count(schema, "minLength", pointer);
    const std::optional<uint64_t> max = count(schema, "maxLength", pointer);
    if (min && max && *max < *min) fail("\"maxLength\" " + std::to_string(*max) + " is below \"minLength\" " + std::to_string(*min), pointer);
    if (pattern && format) fail("\"pattern\" together with \"format\" is not supported", pointer, "put the format into the pattern");
    if (pattern || format) {
      RegexOptions options;
      options.alphabet = RegexAlphabet::json_string_content;
      options.any_char = layout::kChar;
      std::string regex;
      if (pattern) {
        if (!pattern->is_string()) fail("\"pattern\" must be a string, got " + shown(*pattern), pointer);
        regex = pattern->as_string();
        options.anchoring = RegexAnchoring::search;  // JSON Schema's pattern matches anywhere unless anchored
      } else {
        if (!format->is_string()) fail("\"format\" must be a string, got " + shown(*format), pointer);
        const char* known = layout::format_regex(format->as_string());
        if (!known) fail("unsupported format \"" + format->as_string() + "\"", pointer, "supported: " + layout::supported_formats());
        regex = known;
      }
      RegexTranslation t;
      try {
        t = translate_regex(regex, options);
      } catch (const EngineError& e) {
        fail("bad \"pattern\"", pointer, e.what());
      }
      // A grammar cannot intersect a pattern with a length, but a pattern that already implies the length is fine.
      if ((min && t.min_length < *min) || (max && (!t.max_length || *t.max_length > *max)))
        fail(std::string("\"minLength\" / \"maxLength\" together with \"") + (pattern ? "pattern" : "format") + "\"", pointer,
             "supported only when the pattern already keeps to the length; put the length into the pattern");
      if (format) return fixed(layout::format_rule(format->as_string()).c_str(), used_).expr;
      if (t.expr.text.find(layout::kChar) != std::string::npos) used_.insert(layout::kChar);
      return gbnf_writer::sequence({gbnf_writer::literal("\""), t.expr, gbnf_writer::literal("\"")});
    }
    if (!min && !max) return fixed(layout::kString, used_).expr;
    used_.insert(layout::kChar);
    return gbnf_writer::sequence({gbnf_writer::literal("\""), gbnf_writer::repeat(gbnf_writer::rule_ref(layout::kChar), min.value_or(0), max),
                                  gbnf_writer::literal("\"")});
  }

  // ---- numbers ----

  // A numeric bound, exact for integers (long double holds any int64); draft-04's boolean exclusiveMinimum and other
  // non-numbers refused.
  std::optional<long double> bound(const json::Value& schema, const char* key, const std::string& pointer) const {
    const json::Value* v = schema.find(key);
    if (!v) return std::nullopt;
    if (!v->is_number())
      fail(std::string("\"") + key + "\" must be a number, got " + shown(*v), pointer, "draft-04's boolean form is not supported");
    const long double d = v->is_integer() ? static_cast<long double>(v->as_int64()) : v->as_number();
    if (std::fabs(d) > static_cast<long double>(kMaxRangeBound))
      fail(std::string("\"") + key + "\" " + shown(*v) + " is beyond +-1e18", pointer);
    return d;
  }

  [[gnu::noinline]] Expr integer(const json::Value& schema, const std::string& pointer) {
    std::optional<int64_t> lo, hi;
    auto raise = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    if (auto v = bound(schema, "minimum", pointer)) raise(static_cast<int64_t>(std::ceil(*v)));
    if (auto v = bound(schema, "exclusiveMinimum", pointer)) raise(static_cast<int64_t>(std::floor(*v)) + 1);
    if (auto v = bound(schema, "maximum", pointer)) lower(static_cast<int64_t>(std::floor(*v)));
    if (auto v = bound(schema, "exclusiveMaximum", pointer)) lower(static_cast<int64_t>(std::ceil(*v)) - 1);
    if (!lo && !hi) return fixed(layout::kInteger, used_).expr;
    if (lo && hi && *lo > *hi) fail("no integer lies within the bounds (" + std::to_string(*lo) + " to " + std::to_string(*hi) + ")", pointer);
    return integer_range_gbnf(lo, hi);
  }

  [[gnu::noinline]] Expr number(const json::Value& schema, const std::string& pointer) {
    std::optional<DecimalBound> lo, hi;
    auto whole = [&](const char* key) -> std::optional<int64_t> {
      auto v = bound(schema, key, pointer);
      if (!v) return std::nullopt;
      if (std::floor(*v) != *v)
        fail(std::string("\"") + key + "\" " + shown(*schema.find(key)) + " is not a whole number", pointer,
             "bounds on numbers must be integers (or use type integer)");
      return static_cast<int64_t>(*v);
    };
    // Of two lower bounds the larger wins; at a tie the exclusive one.
    auto raise = [&](int64_t v, bool exclusive) {
      if (!lo || v > lo->value || (v == lo->value && exclusive)) lo = DecimalBound{v, exclusive};
    };
    auto lower = [&](int64_t v, bool exclusive) {
      if (!hi || v < hi->value || (v == hi->value && exclusive)) hi = DecimalBound{v, exclusive};
    };
    if (auto v = whole("minimum")) raise(*v, false);
    if (auto v = whole("exclusiveMinimum")) raise(*v, true);
    if (auto v = whole("maximum")) lower(*v, false);
    if (auto v = whole("exclusiveMaximum")) lower(*v, true);
    if (!lo && !hi) return fixed(layout::kNumber, used_).expr;
    auto e = decimal_range_gbnf(lo, hi);
    if (!e) fail("no number lies within the bounds", pointer);
    return *e;
  }
};

}  // namespace

std::string json_schema_to_gbnf(const json::Value& schema) {
  try {
    return SchemaCompiler(schema).run();
  } catch (const EngineError& e) {
    if (e.code() == ErrorCode::invalid_argument) throw;
    // The JSON reader's accessors report bad_checkpoint (they were written for checkpoints): a schema is a request.
    throw EngineError(ErrorCode::invalid_argument, std::string("json_schema: ") + e.what());
  }
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
  json::Value schema;
  try {
    schema = json::parse(schema_text, "json_schema");
  } catch (const EngineError& e) {
    // "json_schema: invalid JSON at byte 17: expected ..." from the reader, re-coded as a request error.
    const std::string what = e.what();
    const size_t at = what.find("invalid JSON ");
    throw EngineError(ErrorCode::invalid_argument,
                      "json_schema: invalid JSON: " + (at == std::string::npos ? what : what.substr(at + 13)));
  }
  return json_schema_to_gbnf(schema);
}

std::string json_any_gbnf(bool object_only) {
  gbnf_writer::RuleSet rules;
  const char* top = object_only ? layout::kObject : layout::kValue;
  rules.define("root", gbnf_writer::rule_ref(top));
  layout::define_rules({top}, rules);
  return rules.text();
}

}  // namespace engine
