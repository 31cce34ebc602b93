#include "grammar/json-schema-merge.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "errors.h"
#include "grammar/json-layout.h"

namespace engine::json_schema {
namespace {

// $ref chains expanded while merging (a -> b -> c ...): deeper is a loop or a schema nobody writes by hand.
constexpr int kMaxRefExpansions = 32;

[[noreturn]] void fail(const std::string& message, const std::string& pointer, const std::string& hint = "") {
  throw EngineError(ErrorCode::invalid_argument,
                    "json_schema: " + message + " at " + describe_pointer(pointer) + (hint.empty() ? "" : ": " + hint));
}

bool is_one_of(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

class Merger {
 public:
  explicit Merger(const ResolveRef& resolve) : resolve_(resolve) {}

  std::string merge(const json::Value& a0, const json::Value& b0, const std::string& pointer) {
    if (a0.is_bool()) return a0.as_bool() ? json_layout::compact(b0) : "false";
    if (b0.is_bool()) return b0.as_bool() ? json_layout::compact(a0) : "false";
    if (!a0.is_object() || !b0.is_object())
      fail("a schema must be an object or a boolean, got " + json_layout::compact(a0.is_object() ? b0 : a0), pointer);
    const json::Value& a = expand_ref(a0, pointer);
    const json::Value& b = expand_ref(b0, pointer);
    check_closed(a, b, pointer);
    check_closed(b, a, pointer);
    std::vector<std::pair<std::string, std::string>> members;  // key, JSON text
    for (const auto& [key, va] : a.as_object()) {
      const json::Value* vb = b.find(key);
      if (key == "nullable") {  // null is allowed only when both allow it
        if (vb && vb->is_bool() && vb->as_bool() && va.is_bool() && va.as_bool()) members.emplace_back(key, "true");
        continue;
      }
      members.emplace_back(key, vb ? keyword(key, va, *vb, pointer) : json_layout::compact(va));
    }
    for (const auto& [key, vb] : b.as_object())
      if (!a.find(key) && key != "nullable") members.emplace_back(key, json_layout::compact(vb));
    std::string out = "{";
    for (const auto& [key, text] : members) {
      if (out.size() > 1) out += ", ";
      out += json_layout::quote(key) + ": " + text;
    }
    return out + "}";
  }

 private:
  const ResolveRef& resolve_;
  std::deque<json::Value> arena_;  // expanded $refs, alive while the merge runs
  int expansions_ = 0;

  // A schema with a $ref, as its target merged with the $ref's siblings.
  const json::Value& expand_ref(const json::Value& s, const std::string& pointer) {
    const json::Value* ref = s.find("$ref");
    if (!ref) return s;
    if (!ref->is_string()) fail("\"$ref\" must be a string, got " + json_layout::compact(*ref), pointer);
    if (++expansions_ > kMaxRefExpansions)
      fail("$ref \"" + ref->as_string() + "\" expands into more than " + std::to_string(kMaxRefExpansions) +
               " nested $refs while merging schemas", pointer, "a $ref loop?");
    const json::Value& target = resolve_(ref->as_string(), pointer);
    std::string rest = "{";
    for (const auto& [key, v] : s.as_object()) {
      if (key == "$ref") continue;
      if (rest.size() > 1) rest += ", ";
      rest += json_layout::quote(key) + ": " + json_layout::compact(v);
    }
    arena_.push_back(json::parse(rest + "}", "json_schema"));
    const std::string merged = merge(target, arena_.back(), pointer);
    arena_.push_back(json::parse(merged, "json_schema"));
    return arena_.back();
  }

  // additionalProperties of one side applies to the properties only the other side names: not expressible by
  // merging the property lists, so refused.
  static void check_closed(const json::Value& x, const json::Value& y, const std::string& pointer) {
    const json::Value* extra = x.find("additionalProperties");
    const json::Value* y_props = y.find("properties");
    if (!extra || (extra->is_bool() && extra->as_bool()) || !y_props || !y_props->is_object()) return;
    const json::Value* x_props = x.find("properties");
    for (const auto& [key, v] : y_props->as_object())
      if (!x_props || !x_props->find(key))
        fail("cannot merge schemas: \"additionalProperties\" of one applies to property \"" + key + "\" of another", pointer,
             "write the combined object schema by hand");
  }

  std::string keyword(const std::string& key, const json::Value& va, const json::Value& vb, const std::string& pointer) {
    const std::string ta = json_layout::compact(va), tb = json_layout::compact(vb);
    if (ta == tb || is_annotation(key) || key == "$defs" || key == "definitions") return ta;
    const std::string at = child_pointer(pointer, key);
    if (key == "type") return types(va, vb, at);
    if (key == "required" && va.is_array() && vb.is_array()) {
      std::vector<std::string> names;
      for (const auto* list : {&va, &vb})
        for (const json::Value& n : list->as_array())
          if (std::find(names.begin(), names.end(), json_layout::compact(n)) == names.end()) names.push_back(json_layout::compact(n));
      std::string out = "[";
      for (const std::string& n : names) out += (out.size() > 1 ? ", " : "") + n;
      return out + "]";
    }
    if (key == "properties" && va.is_object() && vb.is_object()) {
      std::string out = "{";
      auto add = [&](const std::string& name, const std::string& text) {
        if (out.size() > 1) out += ", ";
        out += json_layout::quote(name) + ": " + text;
      };
      for (const auto& [name, sa] : va.as_object()) {
        const json::Value* sb = vb.find(name);
        add(name, sb ? merge(sa, *sb, child_pointer(at, name)) : json_layout::compact(sa));
      }
      for (const auto& [name, sb] : vb.as_object())
        if (!va.find(name)) add(name, json_layout::compact(sb));
      return out + "}";
    }
    if ((key == "items" || key == "additionalProperties") && !va.is_array() && !vb.is_array()) return merge(va, vb, at);
    if (key == "enum" && va.is_array() && vb.is_array()) {
      std::string out = "[";
      for (const json::Value& x : va.as_array()) {
        const std::string tx = json_layout::compact(x);
        const bool in_b = std::any_of(vb.as_array().begin(), vb.as_array().end(),
                                      [&](const json::Value& y) { return json_layout::compact(y) == tx; });
        if (in_b) out += (out.size() > 1 ? ", " : "") + tx;
      }
      if (out.size() == 1) fail("the merged schemas' \"enum\" lists have no value in common", at);
      return out + "]";
    }
    const bool lower = is_one_of(key, {"minimum", "exclusiveMinimum", "minLength", "minItems"});
    const bool upper = is_one_of(key, {"maximum", "exclusiveMaximum", "maxLength", "maxItems"});
    if ((lower || upper) && va.is_number() && vb.is_number()) {
      const bool take_a = lower == (va.as_number() > vb.as_number());
      return take_a ? ta : tb;
    }
    fail("cannot merge \"" + key + "\" of two schemas (" + ta + " and " + tb + ")", pointer, "write the combined schema by hand");
  }

  static std::vector<std::string> type_list(const json::Value& v, const std::string& pointer) {
    std::vector<std::string> out;
    if (v.is_string()) return {v.as_string()};
    if (v.is_array())
      for (const json::Value& t : v.as_array())
        if (t.is_string()) out.push_back(t.as_string());
    if (out.empty()) fail("\"type\" must be a string or an array of strings, got " + json_layout::compact(v), pointer);
    return out;
  }

  // Integers are numbers: number and integer give integer.
  static std::string types(const json::Value& va, const json::Value& vb, const std::string& pointer) {
    const auto a = type_list(va, pointer), b = type_list(vb, pointer);
    auto has = [](const std::vector<std::string>& l, const char* t) { return std::find(l.begin(), l.end(), t) != l.end(); };
    std::vector<std::string> both;
    for (const std::string& t : a) {
      std::string kept;
      if (has(b, t.c_str())) kept = t;
      else if ((t == "integer" && has(b, "number")) || (t == "number" && has(b, "integer"))) kept = "integer";
      if (!kept.empty() && !has(both, kept.c_str())) both.push_back(kept);
    }
    if (both.empty())
      fail("the merged schemas have no \"type\" in common (" + json_layout::compact(va) + " and " + json_layout::compact(vb) + ")",
           pointer);
    if (both.size() == 1) return json_layout::quote(both[0]);
    std::string out = "[";
    for (const std::string& t : both) out += (out.size() > 1 ? ", " : "") + json_layout::quote(t);
    return out + "]";
  }
};

}  // namespace

bool is_annotation(std::string_view keyword) {
  return is_one_of(keyword, {"title", "description", "default", "examples", "example", "$schema", "$id", "$comment",
                             "strict", "deprecated", "readOnly", "writeOnly"});
}

std::string child_pointer(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string describe_pointer(const std::string& pointer) { return pointer.empty() ? "the root" : pointer; }

std::string merge_schemas(const json::Value& a, const json::Value& b, const std::string& pointer,
                          const ResolveRef& resolve) {
  Merger merger(resolve);
  return merger.merge(a, b, pointer);
}

}  // namespace engine::json_schema
