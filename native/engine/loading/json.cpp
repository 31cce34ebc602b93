#include "loading/json.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "errors.h"
#include "utf8.h"

namespace engine::json {

namespace {
// Deep nesting only appears in hostile input; the limit keeps the recursive parser off the stack's edge.
constexpr int kMaxDepth = 256;

[[noreturn]] void type_error(const std::string& what, const char* expected, Type got) {
  throw EngineError(ErrorCode::bad_checkpoint,
                    what + " must be " + expected + ", got " + Value::type_name(got));
}
}  // namespace

const char* Value::type_name(Type t) {
  switch (t) {
    case Type::null: return "null";
    case Type::boolean: return "a boolean";
    case Type::number: return "a number";
    case Type::string: return "a string";
    case Type::array: return "an array";
    case Type::object: return "an object";
  }
  return "?";
}

bool Value::as_bool(const std::string& what) const {
  if (type_ != Type::boolean) type_error(what, "a boolean", type_);
  return bool_;
}
double Value::as_number(const std::string& what) const {
  if (type_ != Type::number) type_error(what, "a number", type_);
  return number_;
}
int64_t Value::as_int64(const std::string& what) const {
  if (type_ != Type::number) type_error(what, "an integer", type_);
  if (is_integer_) return integer_;
  // 64.0 is a valid integer in configs written by some tools; 64.5 is not.
  double d = number_;
  if (d != static_cast<double>(static_cast<int64_t>(d)) || d > 9.0e18 || d < -9.0e18) {
    std::ostringstream s;
    s << what << " must be an integer, got " << d;
    throw EngineError(ErrorCode::bad_checkpoint, s.str());
  }
  return static_cast<int64_t>(d);
}
const std::string& Value::as_string(const std::string& what) const {
  if (type_ != Type::string) type_error(what, "a string", type_);
  return string_;
}
const std::vector<Value>& Value::as_array(const std::string& what) const {
  if (type_ != Type::array) type_error(what, "an array", type_);
  return array_;
}
const std::vector<std::pair<std::string, Value>>& Value::as_object(const std::string& what) const {
  if (type_ != Type::object) type_error(what, "an object", type_);
  return object_;
}
const Value* Value::find(std::string_view key) const {
  if (type_ != Type::object) return nullptr;
  for (const auto& kv : object_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("unexpected trailing characters after the document");
    return v;
  }

 private:
  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& message) { fail_at(pos_, message); }
  [[noreturn]] void fail_at(size_t at, const std::string& message) {
    throw EngineError(ErrorCode::bad_checkpoint,
                      source_ + ": invalid JSON at byte " + std::to_string(at) + ": " + message);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_ws() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++pos_;
      else break;
    }
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal (expected '" + std::string(word) + "')");
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (at_end()) fail("unexpected end of input, expected a value");
    Value v;
    char c = peek();
    switch (c) {
      case 'n': expect_literal("null"); v.type_ = Type::null; return v;
      case 't': expect_literal("true"); v.type_ = Type::boolean; v.bool_ = true; return v;
      case 'f': expect_literal("false"); v.type_ = Type::boolean; v.bool_ = false; return v;
      case '"': v.type_ = Type::string; v.string_ = parse_string(); return v;
      case '[': return parse_array(depth);
      case '{': return parse_object(depth);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail(std::string("unexpected character '") + c + "'");
    }
  }

  Value parse_array(int depth) {
    Value v;
    v.type_ = Type::array;
    ++pos_;  // '['
    skip_ws();
    if (!at_end() && peek() == ']') { ++pos_; return v; }
    while (true) {
      skip_ws();
      v.array_.push_back(parse_value(depth + 1));
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an array");
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == ']') { ++pos_; return v; }
      fail("expected ',' or ']' in an array");
    }
  }

  Value parse_object(int depth) {
    Value v;
    v.type_ = Type::object;
    ++pos_;  // '{'
    skip_ws();
    if (!at_end() && peek() == '}') { ++pos_; return v; }
    while (true) {
      skip_ws();
      if (at_end() || peek() != '"') fail("expected a string key in an object");
      size_t key_at = pos_;
      std::string key = parse_string();
      for (const auto& kv : v.object_)
        if (kv.first == key) fail_at(key_at, "duplicate key \"" + key + "\"");
      skip_ws();
      if (at_end() || peek() != ':') fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      Value member = parse_value(depth + 1);
      v.object_.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an object");
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == '}') { ++pos_; return v; }
      fail("expected ',' or '}' in an object");
    }
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hex_digit(text_[pos_ + i]);
      if (d < 0) fail_at(pos_ + i, "invalid hex digit in \\u escape");
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    pos_ += 4;
    return cp;
  }

  std::string parse_string() {
    size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      char c = text_[pos_];
      if (c == '"') { ++pos_; return out; }
      if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in a string");
      if (c != '\\') { out += c; ++pos_; continue; }
      ++pos_;
      if (at_end()) fail_at(start, "unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          size_t esc_at = pos_ - 2;
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by an escaped low surrogate; together they name one code point.
            if (text_.substr(pos_, 2) != "\\u") fail_at(esc_at, "high surrogate not followed by a low surrogate");
            pos_ += 2;
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at(esc_at, "high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_at(esc_at, "lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail_at(pos_ - 1, std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Value parse_number() {
    size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (at_end()) fail("truncated number");
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      fail("invalid number");
    }
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("expected a digit after '.'");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("expected a digit in the exponent");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    std::string literal(text_.substr(start, pos_ - start));
    Value v;
    v.type_ = Type::number;
    v.number_ = std::strtod(literal.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long i = std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0) {
        v.is_integer_ = true;
        v.integer_ = i;
      }
    }
    return v;
  }
};

Value parse(std::string_view text, const std::string& source) {
  Parser p(text, source);
  return p.parse_document();
}

Value parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EngineError(ErrorCode::not_found, "cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

}  // namespace engine::json
