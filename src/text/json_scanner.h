// A small pull reader for JSON, fast enough to walk a 150k-entry tokenizer.json in milliseconds.
// It reads in place (no document tree); errors name the source, the field and the byte offset.
// simdjson's On-Demand API, measured as a replacement, was slower on both the Qwen and the Gemma 3
// tokenizer.json (bench/micro/tokenizer.cpp); here simdjson only checks the UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace fornace::text {

class JsonScanner {
 public:
  // Checks that `json` is UTF-8 (with simdjson's validator); when it is not, each string is
  // checked as it is read, so that the error names its field.
  JsonScanner(std::string_view json, std::string source_name);

  // Throws Error "<source>: <field>: <what> (at byte N)", N being the current position or
  // `offset`.
  [[noreturn]] void fail_at(std::string_view field, std::string_view what) const;
  [[noreturn]] void fail_at(std::string_view field, std::string_view what, size_t offset) const;
  // The offset of `text`, a view into the JSON (as raw_value() gives).
  size_t offset_of(std::string_view text) const { return text.data() - json_.data(); }

  // The next significant character without consuming it ('\0' at the end).
  char peek() {
    skip_whitespace();
    return position_ < json_.size() ? json_[position_] : '\0';
  }
  // Fails unless only whitespace is left, or when a check of the UTF-8 is still pending.
  void expect_end();

  // Calls `on_member(key)` for each member of the object that comes next; the callback must
  // consume the value. The key stays valid until the next string is read.
  template <typename OnMember>
  void for_each_member(std::string_view field, OnMember&& on_member) {
    expect('{', field, "expected an object");
    if (consume('}')) return;
    do {
      std::string_view key = string(field);
      expect(':', field, "expected ':' after a key");
      on_member(key);
    } while (consume(','));
    expect('}', field, "expected ',' or '}' in an object");
  }

  // Calls `on_element(index)` for each element of the array that comes next; the callback must
  // consume the element.
  template <typename OnElement>
  void for_each_element(std::string_view field, OnElement&& on_element) {
    expect('[', field, "expected an array");
    if (consume(']')) return;
    size_t index = 0;
    do {
      on_element(index++);
    } while (consume(','));
    expect(']', field, "expected ',' or ']' in an array");
  }

  // A string value, unescaped. The view points into the JSON when the string has no escapes and
  // into a scratch buffer otherwise, valid until the next string is read.
  std::string_view string(std::string_view field);
  uint64_t unsigned_integer(std::string_view field);
  bool boolean(std::string_view field);
  // Consumes `null` when it comes next.
  bool null();
  // Consumes any value.
  void skip_value(std::string_view field);
  // Consumes any value and returns its JSON text.
  std::string_view raw_value(std::string_view field);

 private:
  void skip_whitespace() {
    while (position_ < json_.size()) {
      char c = json_[position_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++position_;
    }
  }
  bool consume(char expected) {
    if (peek() != expected) return false;
    ++position_;
    return true;
  }
  void expect(char expected, std::string_view field, std::string_view what) {
    if (!consume(expected)) fail_expected(field, what);
  }
  [[noreturn]] void fail_expected(std::string_view field, std::string_view what) const;
  void skip_value(std::string_view field, int depth);
  void unescape(size_t end_of_plain, std::string_view field);
  void check_utf8(size_t start, size_t end, std::string_view field) const;

  std::string_view json_;
  std::string source_name_;
  size_t position_ = 0;
  std::string scratch_;
  bool invalid_utf8_ = false;  // The JSON holds invalid UTF-8 somewhere.
};

}  // namespace fornace::text
