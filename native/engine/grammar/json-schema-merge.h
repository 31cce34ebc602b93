// "Both a and b" for JSON Schemas, as one schema: allOf, and the keywords written beside an anyOf / oneOf branch list
// or a $ref. A grammar has no intersection operator, so schemas are combined keyword by keyword where the result is
// exact (types intersected, required lists joined, properties merged one by one, bounds tightened, enums
// intersected, equal values kept) and refused, naming the keyword, where it is not.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "loading/json.h"

namespace engine::json_schema {

// Keywords that only describe (JSON Schema's annotations, plus OpenAI's "strict"): accepted anywhere, no effect.
bool is_annotation(std::string_view keyword);

// "/properties/a~1b" for the member "a/b" of "/properties" (RFC 6901 escaping).
std::string child_pointer(const std::string& pointer, std::string_view key);
// For messages: "/properties/age", or "the root".
std::string describe_pointer(const std::string& pointer);

// The schema a local "$ref" names (`pointer` is where the $ref is, for messages).
using ResolveRef = std::function<const json::Value&(const std::string& ref, const std::string& pointer)>;

// The JSON text of one schema equivalent to "a and b". A $ref in a or b is expanded first (its target merged with
// its siblings), so recursion stays behind the $refs nested deeper. Throws EngineError(invalid_argument)
// "json_schema: cannot merge \"minLength\" ... at /allOf/1" when the keywords cannot be combined exactly.
std::string merge_schemas(const json::Value& a, const json::Value& b, const std::string& pointer,
                          const ResolveRef& resolve);

}  // namespace engine::json_schema
