// The JSON reader: valid documents, escapes (incl. surrogate pairs), and malformed input reported with offsets.
#include "check.h"
#include "errors.h"
#include "loading/json.h"

using engine::json::parse;

static void valid_documents() {
  auto v = parse(R"( {"a": 1, "b": [true, false, null], "c": {"d": -2.5e3}, "e": "x", "big": 1234567890123} )",
                 "t.json");
  CHECK(v.is_object());
  CHECK(v.find("a")->as_int64() == 1);
  CHECK(v.find("a")->is_integer());
  const auto& b = v.find("b")->as_array();
  CHECK(b.size() == 3 && b[0].as_bool() && !b[1].as_bool() && b[2].is_null());
  CHECK(v.find("c")->find("d")->as_number() == -2500.0);
  CHECK(!v.find("c")->find("d")->is_integer());
  CHECK(v.find("e")->as_string() == "x");
  CHECK(v.find("big")->as_int64() == 1234567890123LL);
  CHECK(v.find("missing") == nullptr);
  CHECK(parse("[]", "t").as_array().empty());
  CHECK(parse("{}", "t").as_object().empty());
  CHECK(parse("0", "t").as_int64() == 0);
  CHECK(parse("-0.125", "t").as_number() == -0.125);
  CHECK(parse("64.0", "t").as_int64() == 64);  // integral doubles are accepted where an int is wanted
  CHECK_THROWS(parse("64.5", "t").as_int64("field 'x'"), "field 'x' must be an integer");
  CHECK_THROWS(parse("\"s\"", "t").as_int64("field 'x'"), "field 'x' must be an integer, got a string");
}

static void escapes() {
  auto v = parse(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")", "t");
  CHECK(v.as_string() == "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  CHECK(parse("\"caf\xC3\xA9\"", "t").as_string() == "caf\xC3\xA9");  // raw UTF-8 passes through
}

static void malformed() {
  CHECK_THROWS(parse(R"({"a" 1})", "cfg.json"), "cfg.json: invalid JSON at byte 5: expected ':'");
  CHECK_THROWS(parse(R"([1, 2,])", "t"), "at byte 6");
  CHECK_THROWS(parse(R"({"a":1,})", "t"), "at byte 7: expected a string key");
  CHECK_THROWS(parse(R"([1 2])", "t"), "at byte 3: expected ',' or ']'");
  CHECK_THROWS(parse("01", "t"), "at byte 1: unexpected trailing");
  CHECK_THROWS(parse("1.", "t"), "expected a digit after '.'");
  CHECK_THROWS(parse("-", "t"), "at byte 1");
  CHECK_THROWS(parse("\"abc", "t"), "at byte 0: unterminated string");
  CHECK_THROWS(parse("\"a\nb\"", "t"), "at byte 2: unescaped control character");
  CHECK_THROWS(parse(R"("\x")", "t"), "invalid escape");
  CHECK_THROWS(parse(R"("\u12G4")", "t"), "at byte 5: invalid hex digit");
  CHECK_THROWS(parse(R"("\ud83d")", "t"), "high surrogate not followed by a low surrogate");
  CHECK_THROWS(parse(R"("\ude00")", "t"), "lone low surrogate");
  CHECK_THROWS(parse("tru", "t"), "invalid literal");
  CHECK_THROWS(parse("", "t"), "at byte 0: unexpected end of input");
  CHECK_THROWS(parse("[1] x", "t"), "at byte 4: unexpected trailing");
  CHECK_THROWS(parse(R"({"a":1,"a":2})", "t"), "at byte 7: duplicate key \"a\"");
  CHECK_THROWS(parse(std::string(1000, '['), "t"), "nesting deeper");
  CHECK_THROWS(parse("NaN", "t"), "unexpected character 'N'");
  try {
    parse("{", "x.json");
    CHECK(false);
  } catch (const engine::EngineError& e) {
    CHECK(e.code() == engine::ErrorCode::bad_checkpoint);
  }
  CHECK_THROWS(engine::json::parse_file("/nonexistent/dir/config.json"), "/nonexistent/dir/config.json");
}

TEST_MAIN({
  valid_documents();
  escapes();
  malformed();
})
