// A small strict JSON reader (RFC 8259) for the few files a checkpoint carries: config.json,
// generation_config.json, model.safetensors.index.json and safetensors headers. Our own, so the engine builds on
// machines without nlohmann; errors name the source file and the byte offset so a broken file is easy to fix.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine::json {

enum class Type { null, boolean, number, string, array, object };

class Value {
 public:
  Value() = default;
  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_number() const { return type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }
  // True for numbers written without fraction/exponent that fit int64 (offsets must be exact, not doubles).
  bool is_integer() const { return type_ == Type::number && is_integer_; }

  // Accessors throw EngineError(bad_checkpoint) on a type mismatch; `what` names the field for the message.
  bool as_bool(const std::string& what = "value") const;
  double as_number(const std::string& what = "value") const;
  int64_t as_int64(const std::string& what = "value") const;
  const std::string& as_string(const std::string& what = "value") const;
  const std::vector<Value>& as_array(const std::string& what = "value") const;
  const std::vector<std::pair<std::string, Value>>& as_object(const std::string& what = "value") const;

  // Object member lookup; nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;

  static const char* type_name(Type t);  // "null", "boolean", ...

 private:
  friend class Parser;
  Type type_ = Type::null;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;  // insertion order; duplicate keys are rejected
};

// Parses a whole document (trailing non-whitespace is an error). `source` (a path) only appears in messages:
// "<source>: invalid JSON at byte 17: expected ':' after object key".
Value parse(std::string_view text, const std::string& source);

// Reads and parses a file. Missing file -> EngineError(not_found) with the path.
Value parse_file(const std::string& path);

}  // namespace engine::json
