// JsonScanner on hostile JSON: each error names the source, the field and the byte offset (worked
// out by hand below); escapes decode to the right bytes.
#include "text/json_scanner.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/test_files.h"

namespace fornace::text {
namespace {

using test_support::error_message;

std::string string_error(const std::string& json) {
  JsonScanner scanner(json, "doc.json");
  return error_message([&] { scanner.string("name"); });
}

TEST(JsonScanner, DecodesEscapesAndSurrogatePairs) {
  std::string json = R"("a\"b\\c\/\n\t\u00e9\ud83d\ude00")";
  JsonScanner scanner(json, "doc.json");
  EXPECT_EQ(scanner.string("name"),
            "a\"b\\c/\n\t\xC3\xA9"
            "\xF0\x9F\x98\x80");
  scanner.expect_end();
}

TEST(JsonScanner, StringWithoutEscapesIsAViewIntoTheJson) {
  std::string json = R"(  "plain" )";
  JsonScanner scanner(json, "doc.json");
  std::string_view text = scanner.string("name");
  EXPECT_EQ(text, "plain");
  EXPECT_EQ(text.data(), json.data() + 3);
}

TEST(JsonScanner, TruncatedStringNamesWhereItStarts) {
  // The text starts at byte 1, after the opening quote.
  EXPECT_EQ(string_error(R"("abc)"), "doc.json: name: unterminated string (at byte 1)");
  // The last quote is escaped: the unescaping reads to the end, byte 4.
  EXPECT_EQ(string_error(R"("a\")"), "doc.json: name: unterminated string (at byte 4)");
}

TEST(JsonScanner, BadEscapesNameTheirOffset) {
  EXPECT_EQ(string_error(R"("a\qb")"), "doc.json: name: unknown escape in a string (at byte 4)");
  EXPECT_EQ(string_error(R"("\u00g0")"),
            "doc.json: name: bad hex digit in a \\u escape (at byte 6)");
  EXPECT_EQ(string_error(R"("\u12")"), "doc.json: name: truncated \\u escape (at byte 3)");
  EXPECT_EQ(string_error(R"("\udc00")"), "doc.json: name: a lone low surrogate (at byte 7)");
  EXPECT_EQ(string_error(R"("\ud800x")"),
            "doc.json: name: a high surrogate without its low surrogate (at byte 7)");
}

TEST(JsonScanner, InvalidUtf8InAStringNamesItsByte) {
  EXPECT_EQ(string_error("\"ab\xC3(\""), "doc.json: name: not valid UTF-8 (at byte 3)");
  EXPECT_EQ(string_error("\"\\n\xFF\""), "doc.json: name: not valid UTF-8 (at byte 3)");
  JsonScanner valid("\"caf\xC3\xA9\"", "doc.json");
  EXPECT_EQ(valid.string("name"), "caf\xC3\xA9");
  std::string json = "{}\xFF";
  JsonScanner scanner(json, "doc.json");
  scanner.skip_value("");
  EXPECT_EQ(error_message([&] { scanner.expect_end(); }),
            "doc.json: (top level): unexpected text after the top-level value (at byte 2)");
}

TEST(JsonScanner, TruncatedObjectSaysTheFileEnds) {
  std::string json = R"({"a": 1)";
  JsonScanner scanner(json, "doc.json");
  std::string message = error_message([&] {
    scanner.for_each_member("root", [&](std::string_view) { scanner.unsigned_integer("root"); });
  });
  EXPECT_EQ(message,
            "doc.json: root: expected ',' or '}' in an object, but the file ends (at byte 7)");
}

TEST(JsonScanner, IntegersTooLargeOrNotIntegersAreRefused) {
  const auto integer_error = [](const std::string& json) {
    JsonScanner scanner(json, "doc.json");
    return error_message([&] { scanner.unsigned_integer("id"); });
  };
  // 2^64: the 20th digit would overflow, at byte 19.
  EXPECT_EQ(integer_error("18446744073709551616"), "doc.json: id: integer too large (at byte 19)");
  EXPECT_EQ(integer_error("-1"), "doc.json: id: expected a non-negative integer (at byte 0)");
  EXPECT_EQ(integer_error("12.5"), "doc.json: id: expected an integer (at byte 2)");
  JsonScanner scanner(std::string_view("4294967295"), "doc.json");
  EXPECT_EQ(scanner.unsigned_integer("id"), 4294967295u);
}

TEST(JsonScanner, DeepNestingIsRefusedAtTheLimit) {
  // Depth 257 is reached after 257 opening brackets.
  std::string deep = std::string(300, '[') + std::string(300, ']');
  JsonScanner scanner(deep, "doc.json");
  EXPECT_EQ(error_message([&] { scanner.skip_value("extra"); }),
            "doc.json: extra: nesting too deep (at byte 257)");
  std::string allowed = std::string(200, '[') + std::string(200, ']');
  JsonScanner shallow(allowed, "doc.json");
  shallow.skip_value("extra");
  shallow.expect_end();
}

TEST(JsonScanner, RawValueIsTheValuesTextAndSkipsIt) {
  std::string json = R"({"a": {"b": [1, "x]"]}, "c": true})";
  JsonScanner scanner(json, "doc.json");
  std::string raw;
  bool c = false;
  scanner.for_each_member("", [&](std::string_view key) {
    if (key == "a") raw = scanner.raw_value("a");
    if (key == "c") c = scanner.boolean("c");
  });
  scanner.expect_end();
  EXPECT_EQ(raw, R"({"b": [1, "x]"]})");
  EXPECT_TRUE(c);
}

TEST(JsonScanner, TextAfterTheValueIsAnError) {
  std::string json = R"({} x)";
  JsonScanner scanner(json, "doc.json");
  scanner.skip_value("");
  EXPECT_EQ(error_message([&] { scanner.expect_end(); }),
            "doc.json: (top level): unexpected text after the top-level value (at byte 3)");
}

}  // namespace
}  // namespace fornace::text
