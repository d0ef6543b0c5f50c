// Python's str operations over UTF-8 code points, as Jinja templates see strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace fornace::text::jinja {

// The code point at `position`; an invalid byte counts as one character of its own.
uint32_t decode_at(std::string_view text, size_t position, size_t& length);

// Python's str.isspace(), which is also what `\s` and str.strip() use.
bool is_python_space(uint32_t c);

// A string as characters: code points and the byte offset of each (plus the end).
struct Characters {
  std::vector<uint32_t> code_points;
  std::vector<size_t> offsets;
  explicit Characters(std::string_view text) {
    for (size_t position = 0; position < text.size();) {
      size_t length = 0;
      offsets.push_back(position);
      code_points.push_back(decode_at(text, position, length));
      position += length;
    }
    offsets.push_back(text.size());
  }
  size_t size() const { return code_points.size(); }
};

// Python's str.strip / lstrip / rstrip: `chars` null means whitespace.
std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right);

// Python's str.upper() / str.lower().
std::string change_case(std::string_view text, bool upper);

// Python's str.split: by `separator`, or by whitespace runs when it is null; at most `limit`
// splits (negative: no limit).
TemplateValue::List python_split(const std::string& text, const std::string* separator,
                                 int64_t limit, int line);

}  // namespace fornace::text::jinja
