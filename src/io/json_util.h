// JSON parsing shared by the safetensors header and config readers: a nesting guard and one-line
// errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fornace::io {

// Parses `text` as one JSON object. Throws Error "<source_name>: <what> ..." when the text is not
// JSON, is not an object, or nests deeper than a fixed limit (so hostile input cannot exhaust
// the stack).
nlohmann::json parse_json_object(std::string_view text, const std::string& source_name,
                                 const char* what);

// The value of `field` as an int64. Throws Error naming the source and the field when it is not an
// integer or does not fit.
int64_t json_integer(const nlohmann::json& value, const std::string& source_name,
                     const std::string& field);

// A short, one-line rendering of a JSON value for error messages.
std::string json_preview(const nlohmann::json& value);

}  // namespace fornace::io
