// JSON Schema (draft 2020-12 / draft-07, as OpenAI's response_format json_schema and tools[].function.parameters
// use it) to a GBNF grammar whose root matches the JSON texts valid under the schema, written in json-layout.h's
// compact layout. What a context-free grammar can check is checked exactly (types, required and optional properties,
// enum / const, item counts, string lengths, patterns, formats, integer-valued numeric bounds, recursion through
// $ref); a keyword it cannot check, or that we do not implement, is refused with EngineError(invalid_argument)
// naming the keyword and where it is as a JSON pointer — never silently ignored:
//   json_schema: unsupported keyword "patternProperties" at /properties/tags
//   json_schema: "type" must be a string or an array of strings, got 5 at /properties/age
//
// Choices a reader of a schema should know (each documented where it is made, in json-schema-to-gbnf.cpp):
//  - Properties come in the order of "properties"; each optional one may be left out independently.
//  - additionalProperties absent: no members beyond "properties" when "properties" is given, any members when it
//    is not ({"type": "object"} is any object). The output is then a subset of the valid texts, and the one
//    structured-output callers expect (OpenAI's strict mode requires additionalProperties: false anyway).
//  - A schema without "type" that uses keywords of one kind only (properties, items, minLength, minimum...) is
//    taken to be of that kind.
//  - oneOf is generated as anyOf (a grammar cannot check that exactly one branch matches).
//  - allOf, and keywords beside anyOf / oneOf / $ref, are merged keyword by keyword (json-schema-merge.h).
//  - $ref: local JSON pointers ("#", "#/$defs/x", "#/definitions/x"), one rule per referenced schema, so recursion
//    works; only the definitions a $ref reaches are compiled (and checked).
//  - Bounded numbers are written without an exponent; numeric bounds on "number" must be whole numbers.
//  - Annotations are ignored: title, description, default, examples, example, $schema, $id, $comment, strict,
//    deprecated, readOnly, writeOnly.
#pragma once
#include <string>
#include <string_view>

#include "loading/json.h"

namespace engine {

// The whole grammar (rules separated by newlines, `root` first). Throws EngineError(invalid_argument):
// "json_schema: invalid JSON: ..." when the text is not JSON, and the messages above for schemas we cannot follow.
std::string json_schema_to_gbnf(std::string_view schema_text);
std::string json_schema_to_gbnf(const json::Value& schema);

// Any JSON value in the compact layout; object_only: any JSON object (OpenAI's json_object response format).
std::string json_any_gbnf(bool object_only);

}  // namespace engine
