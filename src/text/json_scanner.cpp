// The JSON pull reader: whitespace, strings with escapes, integers, literals and skipping.
#include "text/json_scanner.h"

#include <simdjson.h>

#include <cstring>

#include "text/utf8.h"

namespace fornace::text {
namespace {

constexpr int max_depth = 256;

int hex_value(char digit) {
  if (digit >= '0' && digit <= '9') return digit - '0';
  if (digit >= 'a' && digit <= 'f') return digit - 'a' + 10;
  if (digit >= 'A' && digit <= 'F') return digit - 'A' + 10;
  return -1;
}

}  // namespace

JsonScanner::JsonScanner(std::string_view json, std::string source_name)
    : json_(json),
      source_name_(std::move(source_name)),
      invalid_utf8_(!simdjson::validate_utf8(json.data(), json.size())) {}

void JsonScanner::fail_at(std::string_view field, std::string_view what) const {
  fail_at(field, what, position_);
}

void JsonScanner::fail_at(std::string_view field, std::string_view what, size_t offset) const {
  fail(source_name_, ": ", field.empty() ? std::string_view("(top level)") : field, ": ", what,
       " (at byte ", offset, ")");
}

void JsonScanner::expect_end() {
  if (peek() != '\0') fail_at("", "unexpected text after the top-level value");
  // Invalid UTF-8 that no string held (the walk fails on it elsewhere, so this is a backstop).
  if (invalid_utf8_) fail_at("", "not valid UTF-8", first_invalid_utf8(json_));
}

void JsonScanner::check_utf8(size_t start, size_t end, std::string_view field) const {
  size_t invalid = first_invalid_utf8(json_.substr(start, end - start));
  if (invalid != std::string_view::npos) fail_at(field, "not valid UTF-8", start + invalid);
}

void JsonScanner::fail_expected(std::string_view field, std::string_view what) const {
  if (position_ >= json_.size()) fail_at(field, concat(what, ", but the file ends"));
  fail_at(field, what);
}

std::string_view JsonScanner::string(std::string_view field) {
  expect('"', field, "expected a string");
  size_t start = position_;
  const char* data = json_.data();
  const void* quote = std::memchr(data + start, '"', json_.size() - start);
  if (quote == nullptr) fail_at(field, "unterminated string");
  size_t end = static_cast<const char*>(quote) - data;
  if (std::memchr(data + start, '\\', end - start) == nullptr) {
    if (invalid_utf8_) check_utf8(start, end, field);
    position_ = end + 1;
    return json_.substr(start, end - start);
  }
  unescape(start, field);
  return scratch_;
}

void JsonScanner::unescape(size_t start, std::string_view field) {
  scratch_.clear();
  position_ = start;
  const auto read_hex4 = [&]() -> uint32_t {
    if (position_ + 4 > json_.size()) fail_at(field, "truncated \\u escape");
    uint32_t value = 0;
    for (int index = 0; index < 4; ++index) {
      int digit = hex_value(json_[position_++]);
      if (digit < 0) fail_at(field, "bad hex digit in a \\u escape");
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    return value;
  };
  while (true) {
    if (position_ >= json_.size()) fail_at(field, "unterminated string");
    char c = json_[position_++];
    if (c == '"') {
      if (invalid_utf8_) check_utf8(start, position_ - 1, field);
      return;
    }
    if (c != '\\') {
      scratch_.push_back(c);
      continue;
    }
    if (position_ >= json_.size()) fail_at(field, "unterminated string");
    char kind = json_[position_++];
    switch (kind) {
      case '"':
        scratch_.push_back('"');
        break;
      case '\\':
        scratch_.push_back('\\');
        break;
      case '/':
        scratch_.push_back('/');
        break;
      case 'b':
        scratch_.push_back('\b');
        break;
      case 'f':
        scratch_.push_back('\f');
        break;
      case 'n':
        scratch_.push_back('\n');
        break;
      case 'r':
        scratch_.push_back('\r');
        break;
      case 't':
        scratch_.push_back('\t');
        break;
      case 'u': {
        uint32_t code_point = read_hex4();
        if (code_point >= 0xD800 && code_point <= 0xDBFF) {
          if (position_ + 2 > json_.size() || json_[position_] != '\\' ||
              json_[position_ + 1] != 'u') {
            fail_at(field, "a high surrogate without its low surrogate");
          }
          position_ += 2;
          uint32_t low = read_hex4();
          if (low < 0xDC00 || low > 0xDFFF)
            fail_at(field, "a high surrogate without its low surrogate");
          code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
        } else if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
          fail_at(field, "a lone low surrogate");
        }
        append_code_point(code_point, scratch_);
        break;
      }
      default:
        fail_at(field, "unknown escape in a string");
    }
  }
}

uint64_t JsonScanner::unsigned_integer(std::string_view field) {
  skip_whitespace();
  size_t start = position_;
  uint64_t value = 0;
  while (position_ < json_.size() && json_[position_] >= '0' && json_[position_] <= '9') {
    if (value > (UINT64_MAX - 9) / 10) fail_at(field, "integer too large");
    value = value * 10 + static_cast<uint64_t>(json_[position_] - '0');
    ++position_;
  }
  if (position_ == start) fail_at(field, "expected a non-negative integer");
  if (position_ < json_.size()) {
    char next = json_[position_];
    if (next == '.' || next == 'e' || next == 'E') fail_at(field, "expected an integer");
  }
  return value;
}

bool JsonScanner::boolean(std::string_view field) {
  skip_whitespace();
  if (json_.substr(position_, 4) == "true") {
    position_ += 4;
    return true;
  }
  if (json_.substr(position_, 5) == "false") {
    position_ += 5;
    return false;
  }
  fail_at(field, "expected true or false");
}

bool JsonScanner::null() {
  skip_whitespace();
  if (json_.substr(position_, 4) != "null") return false;
  position_ += 4;
  return true;
}

void JsonScanner::skip_value(std::string_view field) { skip_value(field, 0); }

std::string_view JsonScanner::raw_value(std::string_view field) {
  skip_whitespace();
  size_t start = position_;
  skip_value(field, 0);
  return json_.substr(start, position_ - start);
}

void JsonScanner::skip_value(std::string_view field, int depth) {
  if (depth > max_depth) fail_at(field, "nesting too deep");
  char c = peek();
  if (c == '{') {
    for_each_member(field, [&](std::string_view) { skip_value(field, depth + 1); });
  } else if (c == '[') {
    for_each_element(field, [&](size_t) { skip_value(field, depth + 1); });
  } else if (c == '"') {
    string(field);
  } else if (c == 't' || c == 'f') {
    boolean(field);
  } else if (c == 'n') {
    if (!null()) fail_at(field, "expected a value");
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    size_t start = position_;
    while (position_ < json_.size() &&
           std::strchr("+-.eE0123456789", json_[position_]) != nullptr && json_[position_] != 0) {
      ++position_;
    }
    if (position_ == start) fail_at(field, "expected a number");
  } else {
    fail_at(field, c == '\0' ? "expected a value, but the file ends" : "expected a value");
  }
}

}  // namespace fornace::text
