// Python's str operations over UTF-8 code points, as Jinja templates see strings.
#include "text/jinja/text.h"

#include <utf8proc.h>

#include <algorithm>

#include "text/jinja/error.h"
#include "text/utf8.h"

namespace fornace::text::jinja {

// The code point at `position`; an invalid byte counts as one character of its own.
uint32_t decode_at(std::string_view text, size_t position, size_t& length) {
  unsigned char lead = static_cast<unsigned char>(text[position]);
  if (lead < 0x80) {
    length = 1;
    return lead;
  }
  if (classify_utf8(text, position, length) != Utf8Status::complete) {
    length = 1;
    return 0xDC00 + lead;  // Python's surrogateescape stand-in.
  }
  uint32_t code_point = lead & (0x7F >> length);
  for (size_t index = 1; index < length; ++index)
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[position + index]) & 0x3F);
  return code_point;
}

// Python's str.isspace(), which is also what `\s` and str.strip() use.
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's str.strip / lstrip / rstrip: `chars` null means whitespace.
std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right) {
  Characters characters(text);
  std::vector<uint32_t> set;
  if (chars) set = Characters(*chars).code_points;
  auto strippable = [&](size_t index) {
    uint32_t c = characters.code_points[index];
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_python_space(c);
  };
  size_t begin = 0, end = characters.size();
  if (left)
    while (begin < end && strippable(begin)) ++begin;
  if (right)
    while (end > begin && strippable(end - 1)) --end;
  return std::string(
      text.substr(characters.offsets[begin], characters.offsets[end] - characters.offsets[begin]));
}

std::string change_case(std::string_view text, bool upper) {
  std::string result;
  for (size_t position = 0; position < text.size();) {
    size_t length = 0;
    uint32_t c = decode_at(text, position, length);
    if (c >= 0xDC80 && c <= 0xDCFF) {
      result.append(text.substr(position, length));
    } else {
      auto mapped = upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(c))
                          : utf8proc_tolower(static_cast<utf8proc_int32_t>(c));
      append_code_point(static_cast<uint32_t>(mapped), result);
    }
    position += length;
  }
  return result;
}
// Python's str.split: by `separator`, or by whitespace runs when it is null.
TemplateValue::List python_split(const std::string& text, const std::string* separator,
                                 int64_t limit, int line) {
  TemplateValue::List parts;
  auto splits_left = [&] { return limit < 0 || static_cast<int64_t>(parts.size()) < limit; };
  if (separator) {
    if (separator->empty()) template_error(line, "split(): empty separator");
    size_t position = 0;
    while (splits_left()) {
      size_t found = text.find(*separator, position);
      if (found == std::string::npos) break;
      parts.push_back(TemplateValue::string(text.substr(position, found - position)));
      position = found + separator->size();
    }
    parts.push_back(TemplateValue::string(text.substr(position)));
    return parts;
  }
  Characters characters(text);
  size_t index = 0, count = characters.size();
  auto space = [&](size_t at) { return is_python_space(characters.code_points[at]); };
  while (true) {
    while (index < count && space(index)) ++index;
    if (index == count) break;
    if (!splits_left()) {
      parts.push_back(TemplateValue::string(text.substr(characters.offsets[index])));
      break;
    }
    size_t start = index;
    while (index < count && !space(index)) ++index;
    parts.push_back(TemplateValue::string(text.substr(
        characters.offsets[start], characters.offsets[index] - characters.offsets[start])));
  }
  return parts;
}

}  // namespace fornace::text::jinja
