// JSON parsing shared by the io readers: depth guard, object check and error text.
#include "io/json_util.h"

#include "core/error.h"

namespace fornace::io {

namespace {

constexpr int kMaxJsonDepth = 64;

// The deepest bracket nesting outside strings; stops counting once past the limit.
int nesting_depth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char character : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (character == '\\') {
        escaped = true;
      } else if (character == '"') {
        in_string = false;
      }
      continue;
    }
    if (character == '"') {
      in_string = true;
    } else if (character == '[' || character == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) return deepest;
    } else if (character == ']' || character == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_json_object(std::string_view text, const std::string& source_name,
                                 const char* what) {
  if (nesting_depth(text) > kMaxJsonDepth) {
    fail(source_name, ": ", what, " nests JSON deeper than ", kMaxJsonDepth, " levels");
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& error) {
    fail(source_name, ": ", what, " is not valid JSON (syntax error at byte ", error.byte, ")");
  } catch (const nlohmann::json::exception& error) {
    // For example out_of_range 406: a number too large for a double, such as 1e400.
    fail(source_name, ": ", what, " is not valid JSON (", error.what(), ")");
  }
  if (!value.is_object()) {
    fail(source_name, ": ", what, " is not a JSON object (found ", value.type_name(), ")");
  }
  return value;
}

int64_t json_integer(const nlohmann::json& value, const std::string& source_name,
                     const std::string& field) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(source_name, ": field '", field, "' is too large: ", json_preview(value));
    }
    return value.get<int64_t>();
  }
  fail(source_name, ": field '", field, "' must be an integer, got ", json_preview(value));
}

std::string json_preview(const nlohmann::json& value) {
  constexpr size_t kMaxPreview = 40;
  std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxPreview) text = text.substr(0, kMaxPreview) + "...";
  return text;
}

}  // namespace fornace::io
