// Compiles a JSON schema (the subset that structured outputs take) to a byte-level grammar whose
// sentences are compact JSON texts that validate against it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/grammar.h"

namespace fornace::text {

// Keywords: type (a name or a list), properties, required, additionalProperties, items,
// minItems, maxItems (up to kMaxArrayBound), enum, const, anyOf, $ref to "#..." pointers (into
// $defs, definitions or anywhere, recursion included), and the annotations (title, description,
// default, examples, $schema, $id, $comment). Objects have their declared properties only, in
// schema order, the required ones always; an object schema without properties (and without
// additionalProperties false) takes any object. Whitespace between tokens: none, one space, or
// a newline and up to 16 spaces. Numbers have at most 16 integer digits, 15 fraction digits and
// 2 exponent digits. Throws Error "<what> (at #<pointer>)" for anything else, e.g. "'pattern'
// is not supported (at #/properties/name)".
Grammar compile_json_schema(const nlohmann::ordered_json& schema);

// Any JSON object (response_format json_object).
Grammar json_object_grammar();

// Text, then a JSON text that validates against a schema, then text.
struct FramedSchema {
  std::string before;
  nlohmann::ordered_json schema;
  std::string after;
};
// Any one of `alternatives` (a tool call of one of several functions). Throws Error as
// compile_json_schema does.
Grammar compile_framed_schemas(const std::vector<FramedSchema>& alternatives);

inline constexpr int64_t kMaxArrayBound = 1024;

}  // namespace fornace::text
