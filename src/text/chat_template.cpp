// The chat-template interpreter: a lexer with Jinja's whitespace rules (trim_blocks,
// lstrip_blocks, '-' markers), a parser to a tree that rejects what the subset lacks, and a
// bounded tree walker with Python's semantics for values.
#include "text/chat_template.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "text/json_scanner.h"
#include "text/utf8.h"

namespace fornace::text {

namespace {

constexpr std::string_view kWayAround =
    "; pass the prompt text as the model expects it with --prompt instead";
constexpr int kMaxExpressionDepth = 200;
constexpr int kMaxBlockDepth = 100;

[[noreturn]] void unsupported(std::string_view what, int line) {
  fail("chat template: ", what, " at line ", line, " is not supported", kWayAround);
}

[[noreturn]] void syntax_error(int line, std::string_view what) {
  fail("chat template: line ", line, ": ", what, kWayAround);
}

[[noreturn]] void template_error(int line, std::string_view what) {
  fail("chat template: line ", line, ": ", what);
}

// ---- Code points -----------------------------------------------------------------------------

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

// ---- Values --------------------------------------------------------------------------------

using Kind = TemplateValue::Kind;
using List = TemplateValue::List;
using Dict = TemplateValue::Dict;

bool is_number(const TemplateValue& value) {
  return value.kind() == Kind::boolean || value.kind() == Kind::integer ||
         value.kind() == Kind::floating;
}

// bool counts as int, as in Python.
bool is_integral(const TemplateValue& value) {
  return value.kind() == Kind::boolean || value.kind() == Kind::integer;
}

int64_t integral_value(const TemplateValue& value) {
  return value.kind() == Kind::boolean ? (value.as_boolean() ? 1 : 0) : value.as_integer();
}

double numeric_value(const TemplateValue& value) {
  return value.kind() == Kind::floating ? value.as_floating()
                                        : static_cast<double>(integral_value(value));
}

// Python's type names, for error messages.
std::string type_name(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::list:
      return "list";
    case Kind::dict:
      return "dict";
    case Kind::name_space:
      return "Namespace";
  }
  return "?";
}

bool truthy(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return value.as_boolean();
    case Kind::integer:
      return value.as_integer() != 0;
    case Kind::floating:
      return value.as_floating() != 0;
    case Kind::string:
      return !value.as_string().empty();
    case Kind::list:
      return !value.as_list().empty();
    case Kind::dict:
      return !value.as_dict().empty();
    case Kind::name_space:
      return true;
  }
  return false;
}

// Python's repr() of a float: the shortest round-trip digits, fixed between 1e-4 and 1e16.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  size_t e = scientific.find('e');
  int exponent = std::stoi(scientific.substr(e + 1));
  std::string mantissa = scientific.substr(0, e);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string text = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      text += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      text += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      text += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return text;
  }
  text += digits.substr(0, 1);
  if (digits.size() > 1) text += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return text + exponent_text;
}

// Python's repr() of a str.
std::string python_repr_string(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t position = 0; position < text.size();) {
    size_t length = 0;
    uint32_t c = decode_at(text, position, length);
    char escape[16];
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      std::snprintf(escape, sizeof(escape), "\\udc%02x", c & 0xFF);
      out += escape;
    } else if (c == ' ' || (c > 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
    } else {
      auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      bool printable = c >= 0x7F && category != UTF8PROC_CATEGORY_CC &&
                       category != UTF8PROC_CATEGORY_CF && category != UTF8PROC_CATEGORY_CS &&
                       category != UTF8PROC_CATEGORY_CO && category != UTF8PROC_CATEGORY_CN &&
                       category != UTF8PROC_CATEGORY_ZL && category != UTF8PROC_CATEGORY_ZP &&
                       category != UTF8PROC_CATEGORY_ZS;
      if (printable) {
        out.append(text.substr(position, length));
      } else {
        std::snprintf(escape, sizeof(escape),
                      c < 0x100     ? "\\x%02x"
                      : c < 0x10000 ? "\\u%04x"
                                    : "\\U%08x",
                      c);
        out += escape;
      }
    }
    position += length;
  }
  return out + quote;
}

std::string python_str(const TemplateValue& value);

std::string python_repr(const TemplateValue& value) {
  return value.kind() == Kind::string ? python_repr_string(value.as_string()) : python_str(value);
}

// Python's str() of a value; Undefined is "" as Jinja's default Undefined prints.
std::string python_str(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
      return "";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return value.as_boolean() ? "True" : "False";
    case Kind::integer:
      return std::to_string(value.as_integer());
    case Kind::floating:
      return python_float(value.as_floating());
    case Kind::string:
      return value.as_string();
    case Kind::list: {
      std::string out = "[";
      for (size_t index = 0; index < value.as_list().size(); ++index) {
        if (index) out += ", ";
        const TemplateValue& item = value.as_list()[index];
        out += item.is_undefined() ? "Undefined" : python_repr(item);
      }
      return out + "]";
    }
    case Kind::dict:
    case Kind::name_space: {
      std::string out = value.kind() == Kind::dict ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : value.as_dict()) {
        if (!first) out += ", ";
        first = false;
        out += python_repr_string(key) + ": " +
               (item.is_undefined() ? "Undefined" : python_repr(item));
      }
      return out + (value.kind() == Kind::dict ? "}" : "}>");
    }
  }
  return "";
}

// json.dumps(value, ensure_ascii=False, indent=indent), as transformers' tojson filter calls it.
void append_json(const TemplateValue& value, int indent, int level, int line, std::string& out) {
  auto newline = [&](int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * depth, ' ');
  };
  const char* item_separator = indent < 0 ? ", " : ",";
  switch (value.kind()) {
    case Kind::undefined:
    case Kind::name_space:
      template_error(
          line, concat("tojson: Object of type ", type_name(value), " is not JSON serializable"));
    case Kind::none:
      out += "null";
      return;
    case Kind::boolean:
      out += value.as_boolean() ? "true" : "false";
      return;
    case Kind::integer:
      out += std::to_string(value.as_integer());
      return;
    case Kind::floating: {
      double number = value.as_floating();
      out += std::isnan(number)   ? "NaN"
             : std::isinf(number) ? (number < 0 ? "-Infinity" : "Infinity")
                                  : python_float(number);
      return;
    }
    case Kind::string: {
      out += '"';
      for (char c : value.as_string()) {
        unsigned char byte = static_cast<unsigned char>(c);
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          default:
            if (byte < 0x20) {
              char escape[8];
              std::snprintf(escape, sizeof(escape), "\\u%04x", byte);
              out += escape;
            } else {
              out += c;
            }
        }
      }
      out += '"';
      return;
    }
    case Kind::list: {
      const List& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t index = 0; index < items.size(); ++index) {
        if (index) out += item_separator;
        newline(level + 1);
        append_json(items[index], indent, level + 1, line, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case Kind::dict: {
      const Dict& members = value.as_dict();
      if (members.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t index = 0; index < members.size(); ++index) {
        if (index) out += item_separator;
        newline(level + 1);
        append_json(TemplateValue::string(members[index].first), indent, level + 1, line, out);
        out += ": ";
        append_json(members[index].second, indent, level + 1, line, out);
      }
      newline(level);
      out += '}';
      return;
    }
  }
}

TemplateValue value_from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return TemplateValue::none();
    case nlohmann::ordered_json::value_t::boolean:
      return TemplateValue::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return TemplateValue::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t number = json.get<uint64_t>();
      if (number > static_cast<uint64_t>(INT64_MAX))
        fail("JSON: integer ", number, " is too large");
      return TemplateValue::integer(static_cast<int64_t>(number));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return TemplateValue::floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return TemplateValue::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : json) items.push_back(value_from_json(item));
      return TemplateValue::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict members;
      for (const auto& [key, item] : json.items()) members.emplace_back(key, value_from_json(item));
      return TemplateValue::dict(std::move(members));
    }
    default:
      fail("JSON: unsupported value");
  }
}

// ---- Lexer -----------------------------------------------------------------------------------

enum class TokenType {
  text,
  variable_begin,
  variable_end,
  block_begin,
  block_end,
  name,
  string,
  integer,
  floating,
  op,
  end
};

struct Token {
  TokenType type;
  std::string value;  // Text, name, string contents or operator.
  int64_t integer = 0;
  double floating = 0;
  int line = 1;
};

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // Jinja's source normalization: every newline kind becomes "\n" and one trailing newline
    // goes (keep_trailing_newline=False).
    for (size_t index = 0; index < source.size(); ++index) {
      if (source[index] == '\r') {
        source_ += '\n';
        if (index + 1 < source.size() && source[index + 1] == '\n') ++index;
      } else {
        source_ += source[index];
      }
    }
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
  }

  std::vector<Token> tokenize() {
    bool line_starting = true;
    while (position_ < source_.size()) {
      size_t start = find_tag_start(position_);
      std::string text = source_.substr(position_, start - position_);
      int text_line = line_;
      advance_to(start);
      if (start == source_.size()) {
        push_text(std::move(text), text_line);
        break;
      }
      char kind = source_[start + 1];
      char sign = start + 2 < source_.size() ? source_[start + 2] : '\0';
      if (sign == '-') {
        text = python_strip(text, nullptr, false, true);
      } else if (sign != '+' && kind != '{') {     // lstrip_blocks: not for {{ }}.
        size_t line_start = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((line_start > 0 || line_starting) && line_start < text.size() &&
            all_space(std::string_view(text).substr(line_start))) {
          text.erase(line_start);
        }
      }
      push_text(std::move(text), text_line);
      size_t cursor = start + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      advance_to(cursor);
      if (kind == '#') {
        line_starting = skip_comment();
      } else {
        line_starting = tokenize_tag(kind == '{');
      }
    }
    tokens_.push_back(Token{TokenType::end, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t index = source_.find('{', from); index != std::string::npos;
         index = source_.find('{', index + 1)) {
      if (index + 1 < source_.size()) {
        char next = source_[index + 1];
        if (next == '{' || next == '%' || next == '#') return index;
      }
    }
    return source_.size();
  }

  static bool all_space(std::string_view text) {
    for (size_t position = 0; position < text.size();) {
      size_t length = 0;
      if (!is_python_space(decode_at(text, position, length))) return false;
      position += length;
    }
    return true;
  }

  // Moves to `target`, counting lines.
  void advance_to(size_t target) {
    line_ +=
        static_cast<int>(std::count(source_.begin() + position_, source_.begin() + target, '\n'));
    position_ = target;
  }

  void skip_spaces() {
    size_t position = position_;
    while (position < source_.size()) {
      size_t length = 0;
      if (!is_python_space(decode_at(source_, position, length))) break;
      position += length;
    }
    advance_to(position);
  }

  bool starts_with(std::string_view text) const {
    return std::string_view(source_).substr(position_, text.size()) == text;
  }

  void push_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::text, std::move(text), 0, 0, line});
  }

  void push(TokenType type, std::string value) {
    tokens_.push_back(Token{type, std::move(value), 0, 0, line_});
  }

  // Consumes a tag's end: '-' takes the whitespace after it, trim_blocks one newline after %}.
  // Returns whether what it consumed ends with a newline (lstrip_blocks' line start).
  bool end_tag(size_t marker_length, bool strip, bool trim_newline) {
    advance_to(position_ + marker_length);
    size_t before = position_;
    if (strip) {
      skip_spaces();
    } else if (trim_newline && position_ < source_.size() && source_[position_] == '\n') {
      advance_to(position_ + 1);
    }
    return position_ > before && source_[position_ - 1] == '\n';
  }

  bool skip_comment() {
    int line = line_;
    size_t close = source_.find("#}", position_);
    if (close == std::string::npos) syntax_error(line, "a comment '{#' is never closed");
    char before = close > position_ ? source_[close - 1] : '\0';
    advance_to(close);
    return end_tag(2, before == '-', before != '+');
  }

  bool tokenize_tag(bool is_variable) {
    int open_line = line_;
    push(is_variable ? TokenType::variable_begin : TokenType::block_begin, "");
    std::vector<char> brackets;
    while (true) {
      skip_spaces();
      if (position_ >= source_.size()) {
        syntax_error(open_line, is_variable ? "'{{' is never closed" : "'{%' is never closed");
      }
      if (brackets.empty()) {
        if (is_variable && (starts_with("-}}") || starts_with("}}"))) {
          bool strip = source_[position_] == '-';
          push(TokenType::variable_end, "");
          return end_tag(strip ? 3 : 2, strip, false);
        }
        if (!is_variable && (starts_with("-%}") || starts_with("+%}") || starts_with("%}"))) {
          char first = source_[position_];
          push(TokenType::block_end, "");
          return end_tag(first == '%' ? 2 : 3, first == '-', first == '%');
        }
      }
      char c = source_[position_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = position_;
        while (end < source_.size() &&
               (std::isalnum(static_cast<unsigned char>(source_[end])) || source_[end] == '_'))
          ++end;
        push(TokenType::name, source_.substr(position_, end - position_));
        advance_to(end);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(brackets);
      }
    }
  }

  void lex_number() {
    size_t end = position_;
    auto digits = [&] {
      while (end < source_.size() &&
             (std::isdigit(static_cast<unsigned char>(source_[end])) || source_[end] == '_'))
        ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < source_.size() && source_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t exponent = end + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-'))
        ++exponent;
      if (exponent < source_.size() &&
          std::isdigit(static_cast<unsigned char>(source_[exponent]))) {
        is_float = true;
        end = exponent;
        digits();
      }
    }
    std::string text;
    for (size_t index = position_; index < end; ++index)
      if (source_[index] != '_') text += source_[index];
    Token token{is_float ? TokenType::floating : TokenType::integer, text, 0, 0, line_};
    if (is_float) {
      token.floating = std::strtod(text.c_str(), nullptr);
    } else {
      auto result = std::from_chars(text.data(), text.data() + text.size(), token.integer);
      if (result.ec != std::errc())
        unsupported(concat("the integer ", text, " (past 64 bits)"), line_);
    }
    tokens_.push_back(std::move(token));
    advance_to(end);
  }

  // A string literal with Python's escapes (Jinja decodes them with unicode-escape).
  void lex_string(char quote) {
    int line = line_;
    std::string value;
    size_t index = position_ + 1;
    while (true) {
      if (index >= source_.size()) syntax_error(line, "a string literal is never closed");
      char c = source_[index];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++index;
        continue;
      }
      if (index + 1 >= source_.size()) syntax_error(line, "a string literal is never closed");
      char escaped = source_[index + 1];
      index += 2;
      auto hex = [&](size_t count) {
        if (index + count > source_.size())
          syntax_error(line, "a truncated \\x, \\u or \\U escape");
        uint32_t code_point = 0;
        auto result =
            std::from_chars(source_.data() + index, source_.data() + index + count, code_point, 16);
        if (result.ec != std::errc() || result.ptr != source_.data() + index + count ||
            code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
          syntax_error(line, "a malformed \\x, \\u or \\U escape");
        index += count;
        append_code_point(code_point, value);
      };
      switch (escaped) {
        case '\n':
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
          hex(2);
          break;
        case 'u':
          hex(4);
          break;
        case 'U':
          hex(8);
          break;
        case 'N':
          unsupported("the \\N{...} escape", line);
        default:
          if (escaped >= '0' && escaped <= '7') {
            uint32_t code_point = static_cast<uint32_t>(escaped - '0');
            for (int digit = 0; digit < 2 && index < source_.size() && source_[index] >= '0' &&
                                source_[index] <= '7';
                 ++digit)
              code_point = code_point * 8 + static_cast<uint32_t>(source_[index++] - '0');
            append_code_point(code_point, value);
          } else {
            value += '\\';
            value += escaped;
          }
      }
    }
    tokens_.push_back(Token{TokenType::string, std::move(value), 0, 0, line});
    advance_to(index + 1);
  }

  void lex_operator(std::vector<char>& brackets) {
    static constexpr std::string_view kTwoCharacter[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoCharacter) {
      if (starts_with(op)) {
        push(TokenType::op, std::string(op));
        advance_to(position_ + 2);
        return;
      }
    }
    char c = source_[position_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t length = 0;
      decode_at(source_, position_, length);
      syntax_error(line_, concat("unexpected character '", source_.substr(position_, length), "'"));
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open)
        syntax_error(line_, concat("unexpected '", c, "'"));
      brackets.pop_back();
    }
    push(TokenType::op, std::string(1, c));
    advance_to(position_ + 1);
  }

  std::string source_;
  size_t position_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

// ---- Tree ------------------------------------------------------------------------------------

enum class ExprKind {
  literal,
  name,
  list,
  dict,
  attribute,  // operands[0].name
  subscript,  // operands[0][operands[1]]
  slice,      // operands[0][operands[1]:operands[2]:operands[3]], absent bounds null
  negate,
  plus,
  logical_not,
  binary,   // operands[0] name operands[1]
  concat,   // operands joined by ~
  compare,  // operands[0] comparisons[0] operands[1] comparisons[1] ...
  logical_and,
  logical_or,
  conditional,  // operands[1] if operands[0] else operands[2] (may be null)
  filter,       // name(operands[0], operands[1:], keywords)
  test,         // operands[0] is [not] name
  method,       // operands[0].name(operands[1:], keywords)
  function,     // name(operands, keywords): raise_exception, namespace, range
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int depth = 1;
  std::string name;
  TemplateValue literal;
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> operands;
  std::vector<std::string> comparisons;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> keywords;
};
using ExprPtr = std::unique_ptr<Expr>;

enum class NodeKind { text, output, branch, loop, assign };

struct Node {
  Node(NodeKind node_kind, int node_line) : kind(node_kind), line(node_line) {}
  NodeKind kind;
  int line;
  std::string text;                       // text; the loop variable; the assigned name
  std::string attribute;                  // assign: set name.attribute
  ExprPtr expression;                     // output; the loop's iterable; the assigned value
  std::vector<ExprPtr> conditions;        // branch: if / elif conditions
  std::vector<std::vector<Node>> bodies;  // branch: one per condition; loop: the body
  std::vector<Node> else_body;            // branch and loop
  // loop: names that start each iteration Undefined (Jinja's scoping; see analyze_frame).
  std::vector<std::string> undefined_at_start;
};
using Body = std::vector<Node>;

const std::vector<std::string_view> kFilters = {"trim",  "length", "count",   "tojson",  "string",
                                                "upper", "lower",  "default", "d",       "first",
                                                "last",  "join",   "reverse", "replace", "list"};
const std::vector<std::string_view> kTests = {
    "defined", "undefined", "none",    "string",   "number",   "integer", "float", "boolean",
    "true",    "false",     "mapping", "iterable", "sequence", "odd",     "even"};
const std::vector<std::string_view> kMethods = {"startswith", "endswith", "split", "strip",
                                                "lstrip",     "rstrip",   "upper", "lower",
                                                "replace",    "get",      "keys",  "values"};
const std::vector<std::string_view> kFunctions = {"raise_exception", "namespace", "range"};

bool contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_template() {
    Body body;
    parse_body(body, {}, 0);
    return body;
  }

 private:
  const Token& current() const { return tokens_[index_]; }
  const Token& peek_next() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  Token take() { return tokens_[index_ < tokens_.size() - 1 ? index_++ : index_]; }
  bool is_op(std::string_view op) const {
    return current().type == TokenType::op && current().value == op;
  }
  bool is_name(std::string_view name) const {
    return current().type == TokenType::name && current().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++index_;
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    ++index_;
    return true;
  }

  std::string describe(const Token& token) const {
    switch (token.type) {
      case TokenType::end:
        return "the end of the template";
      case TokenType::variable_end:
        return "'}}'";
      case TokenType::block_end:
        return "'%}'";
      case TokenType::text:
        return "text";
      default:
        return "'" + token.value + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op))
      syntax_error(current().line, concat("expected '", op, "', found ", describe(current())));
  }
  std::string expect_name(std::string_view what) {
    if (current().type != TokenType::name)
      syntax_error(current().line, concat("expected ", what, ", found ", describe(current())));
    return take().value;
  }
  void expect_block_end(std::string_view tag) {
    if (current().type != TokenType::block_end)
      syntax_error(current().line,
                   concat("expected '%}' after '", tag, "', found ", describe(current())));
    ++index_;
  }

  // Parses nodes into `body` until one of `end_tags` (returned, the stream after its name) or
  // the end of the template (returns "").
  std::string parse_body(Body& body, const std::vector<std::string_view>& end_tags, int depth) {
    if (depth > kMaxBlockDepth)
      syntax_error(current().line, concat("blocks nest deeper than ", kMaxBlockDepth, " levels"));
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::end) return "";
      if (token.type == TokenType::text) {
        Node node(NodeKind::text, token.line);
        node.text = token.value;
        body.push_back(std::move(node));
        ++index_;
        continue;
      }
      if (token.type == TokenType::variable_begin) {
        ++index_;
        Node node(NodeKind::output, token.line);
        node.expression = parse_expression();
        if (current().type != TokenType::variable_end)
          syntax_error(current().line, concat("expected '}}', found ", describe(current())));
        ++index_;
        body.push_back(std::move(node));
        continue;
      }
      if (token.type != TokenType::block_begin)
        syntax_error(token.line, concat("unexpected ", describe(token)));
      ++index_;
      int line = current().line;
      std::string tag = expect_name("a tag name");
      if (contains(end_tags, tag)) return tag;
      if (tag == "if") {
        body.push_back(parse_if(line, depth));
      } else if (tag == "for") {
        body.push_back(parse_for(line, depth));
      } else if (tag == "set") {
        body.push_back(parse_set(line));
      } else if (tag == "elif" || tag == "else" || tag == "endif" || tag == "endfor" ||
                 tag == "endset") {
        syntax_error(line, concat("unexpected '{% ", tag, " %}'"));
      } else {
        unsupported(concat("the tag '{% ", tag, " %}'"), line);
      }
    }
  }

  void expect_closed(const std::string& stopped, int line, std::string_view opener,
                     std::string_view closer) {
    if (stopped.empty())
      syntax_error(line, concat("'{% ", opener, " %}' is never closed by '{% ", closer, " %}'"));
  }

  Node parse_if(int line, int depth) {
    Node node(NodeKind::branch, line);
    node.conditions.push_back(parse_expression());
    expect_block_end("if");
    while (true) {
      node.bodies.emplace_back();
      std::string stopped = parse_body(node.bodies.back(), {"elif", "else", "endif"}, depth + 1);
      expect_closed(stopped, line, "if", "endif");
      if (stopped == "elif") {
        node.conditions.push_back(parse_expression());
        expect_block_end("elif");
        continue;
      }
      if (stopped == "else") {
        expect_block_end("else");
        stopped = parse_body(node.else_body, {"endif"}, depth + 1);
        expect_closed(stopped, line, "if", "endif");
      }
      expect_block_end("endif");
      return node;
    }
  }

  Node parse_for(int line, int depth) {
    Node node(NodeKind::loop, line);
    node.text = expect_name("a loop variable");
    if (is_op(",")) unsupported("unpacking several loop variables", line);
    if (!skip_name("in"))
      syntax_error(current().line, concat("expected 'in', found ", describe(current())));
    node.expression = parse_or();
    if (is_name("if")) unsupported("a loop filter ('for ... if')", line);
    if (is_name("recursive")) unsupported("a recursive loop", line);
    expect_block_end("for");
    node.bodies.emplace_back();
    std::string stopped = parse_body(node.bodies.back(), {"else", "endfor"}, depth + 1);
    expect_closed(stopped, line, "for", "endfor");
    if (stopped == "else") {
      expect_block_end("else");
      stopped = parse_body(node.else_body, {"endfor"}, depth + 1);
      expect_closed(stopped, line, "for", "endfor");
    }
    expect_block_end("endfor");
    return node;
  }

  Node parse_set(int line) {
    Node node(NodeKind::assign, line);
    node.text = expect_name("a variable name");
    if (skip_op(".")) node.attribute = expect_name("an attribute name");
    if (is_op(",")) unsupported("assigning several variables at once", line);
    if (current().type == TokenType::block_end)
      unsupported("a block '{% set %}...{% endset %}'", line);
    expect_op("=");
    node.expression = parse_expression();
    expect_block_end("set");
    return node;
  }

  // Makes a node, checking that the tree stays shallow enough to walk recursively.
  ExprPtr make(ExprKind kind, int line, std::vector<ExprPtr> operands = {}) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    expr->operands = std::move(operands);
    finish(*expr);
    return expr;
  }

  void finish(Expr& expr) {
    int depth = 0;
    for (const ExprPtr& operand : expr.operands)
      if (operand) depth = std::max(depth, operand->depth);
    for (const auto& keyword : expr.keywords) depth = std::max(depth, keyword.second->depth);
    expr.depth = depth + 1;
    if (expr.depth > kMaxExpressionDepth)
      syntax_error(expr.line,
                   concat("an expression nests deeper than ", kMaxExpressionDepth, " levels"));
  }

  // Guards the parser's own recursion (parentheses, unary operators).
  struct DepthGuard {
    Parser& parser;
    explicit DepthGuard(Parser& owner, int line) : parser(owner) {
      if (++parser.recursion_ > kMaxExpressionDepth)
        syntax_error(line,
                     concat("an expression nests deeper than ", kMaxExpressionDepth, " levels"));
    }
    ~DepthGuard() { --parser.recursion_; }
  };

  ExprPtr parse_expression() {
    DepthGuard guard(*this, current().line);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = take().line;
      ExprPtr condition = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression();
      std::vector<ExprPtr> operands;
      operands.push_back(std::move(condition));
      operands.push_back(std::move(expr));
      operands.push_back(std::move(otherwise));
      expr = make(ExprKind::conditional, line, std::move(operands));
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, int line, ExprPtr left, ExprPtr right, std::string name = "") {
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(left));
    operands.push_back(std::move(right));
    ExprPtr expr = make(kind, line, std::move(operands));
    expr->name = std::move(name);
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = take().line;
      left = binary(ExprKind::logical_or, line, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = take().line;
      left = binary(ExprKind::logical_and, line, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, current().line);
      int line = take().line;
      std::vector<ExprPtr> operands;
      operands.push_back(parse_not());
      return make(ExprKind::logical_not, line, std::move(operands));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = current().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<std::string> comparisons;
    while (true) {
      std::string op;
      if (current().type == TokenType::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = take().value;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && peek_next().type == TokenType::name &&
                 peek_next().value == "in") {
        index_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (operands.empty()) operands.push_back(std::move(first));
      operands.push_back(parse_math1());
      comparisons.push_back(op);
    }
    if (operands.empty()) return first;
    ExprPtr expr = make(ExprKind::compare, line, std::move(operands));
    expr->comparisons = std::move(comparisons);
    return expr;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_concat(), op.value);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = current().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(first));
    while (skip_op("~")) operands.push_back(parse_math2());
    return make(ExprKind::concat, line, std::move(operands));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_pow(), op.value);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_unary(true), op.value);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr expr;
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(*this, current().line);
      Token op = take();
      std::vector<ExprPtr> operands;
      operands.push_back(parse_unary(false));
      expr =
          make(op.value == "-" ? ExprKind::negate : ExprKind::plus, op.line, std::move(operands));
    } else {
      expr = parse_primary();
    }
    expr = parse_postfix(std::move(expr));
    if (with_filter) expr = parse_filters(std::move(expr));
    return expr;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    int line = token.line;
    switch (token.type) {
      case TokenType::name: {
        std::string name = take().value;
        if (name == "true" || name == "True" || name == "false" || name == "False") {
          ExprPtr expr = make(ExprKind::literal, line);
          expr->literal = TemplateValue::boolean(name == "true" || name == "True");
          return expr;
        }
        if (name == "none" || name == "None") {
          ExprPtr expr = make(ExprKind::literal, line);
          expr->literal = TemplateValue::none();
          return expr;
        }
        ExprPtr expr = make(ExprKind::name, line);
        expr->name = std::move(name);
        return expr;
      }
      case TokenType::string: {
        std::string value;
        while (current().type == TokenType::string) value += take().value;
        ExprPtr expr = make(ExprKind::literal, line);
        expr->literal = TemplateValue::string(std::move(value));
        return expr;
      }
      case TokenType::integer:
      case TokenType::floating: {
        Token number = take();
        ExprPtr expr = make(ExprKind::literal, line);
        expr->literal = number.type == TokenType::integer
                            ? TemplateValue::integer(number.integer)
                            : TemplateValue::floating(number.floating);
        return expr;
      }
      case TokenType::op:
        if (skip_op("(")) {
          if (is_op(")")) unsupported("a tuple", line);
          ExprPtr inner = parse_expression();
          if (is_op(",")) unsupported("a tuple", line);
          expect_op(")");
          return inner;
        }
        if (skip_op("[")) {
          DepthGuard guard(*this, line);
          std::vector<ExprPtr> items;
          while (!is_op("]")) {
            if (!items.empty()) expect_op(",");
            if (is_op("]")) break;
            items.push_back(parse_expression());
          }
          expect_op("]");
          return make(ExprKind::list, line, std::move(items));
        }
        if (skip_op("{")) {
          DepthGuard guard(*this, line);
          std::vector<ExprPtr> items;  // key, value, key, value, ...
          while (!is_op("}")) {
            if (!items.empty()) expect_op(",");
            if (is_op("}")) break;
            items.push_back(parse_expression());
            expect_op(":");
            items.push_back(parse_expression());
          }
          expect_op("}");
          return make(ExprKind::dict, line, std::move(items));
        }
        break;
      default:
        break;
    }
    syntax_error(line, concat("expected an expression, found ", describe(token)));
  }

  // Positional and keyword arguments up to ')', the '(' already consumed.
  void parse_arguments(Expr& call) {
    DepthGuard guard(*this, call.line);
    for (bool first = true; !is_op(")"); first = false) {
      if (!first) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) unsupported("'*' and '**' arguments", current().line);
      if (current().type == TokenType::name && peek_next().type == TokenType::op &&
          peek_next().value == "=") {
        std::string keyword = take().value;
        ++index_;
        call.keywords.emplace_back(keyword, parse_expression());
      } else {
        if (!call.keywords.empty())
          syntax_error(current().line, "a positional argument follows a keyword argument");
        call.operands.push_back(parse_expression());
      }
    }
    expect_op(")");
    finish(call);
  }

  ExprPtr parse_postfix(ExprPtr expr) {
    while (true) {
      int line = current().line;
      if (skip_op(".")) {
        if (current().type == TokenType::integer) unsupported("'.N' item access", line);
        std::string name = expect_name("an attribute name");
        std::vector<ExprPtr> operands;
        operands.push_back(std::move(expr));
        expr = make(ExprKind::attribute, line, std::move(operands));
        expr->name = std::move(name);
      } else if (skip_op("[")) {
        expr = parse_subscript(std::move(expr), line);
      } else if (skip_op("(")) {
        expr = parse_call(std::move(expr), line);
      } else {
        return expr;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr subject, int line) {
    DepthGuard guard(*this, line);
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(subject));
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) {
        if (is_op(",")) unsupported("a tuple subscript", line);
        expect_op("]");
        operands.push_back(std::move(start));
        return make(ExprKind::subscript, line, std::move(operands));
      }
    }
    expect_op(":");
    ExprPtr stop, step;
    if (!is_op("]") && !is_op(":")) stop = parse_expression();
    if (skip_op(":") && !is_op("]")) step = parse_expression();
    expect_op("]");
    operands.push_back(std::move(start));
    operands.push_back(std::move(stop));
    operands.push_back(std::move(step));
    return make(ExprKind::slice, line, std::move(operands));
  }

  ExprPtr parse_call(ExprPtr callee, int line) {
    auto call = std::make_unique<Expr>();
    call->line = line;
    if (callee->kind == ExprKind::name) {
      if (!contains(kFunctions, callee->name))
        unsupported(concat("calling '", callee->name, "()'"), line);
      call->kind = ExprKind::function;
      call->name = callee->name;
    } else if (callee->kind == ExprKind::attribute) {
      if (!contains(kMethods, callee->name))
        unsupported(concat("the method '.", callee->name, "()'"), line);
      call->kind = ExprKind::method;
      call->name = callee->name;
      call->operands.push_back(std::move(callee->operands[0]));
    } else {
      unsupported("calling the result of an expression", line);
    }
    parse_arguments(*call);
    return call;
  }

  ExprPtr parse_filters(ExprPtr expr) {
    while (true) {
      int line = current().line;
      if (skip_op("|")) {
        std::string name = expect_name("a filter name");
        if (!contains(kFilters, name)) unsupported(concat("the filter '", name, "'"), line);
        auto filter = std::make_unique<Expr>();
        filter->kind = ExprKind::filter;
        filter->line = line;
        filter->name = std::move(name);
        filter->operands.push_back(std::move(expr));
        if (skip_op("(")) {
          parse_arguments(*filter);
        } else {
          finish(*filter);
        }
        expr = std::move(filter);
      } else if (skip_name("is")) {
        bool negated = skip_name("not");
        std::string name = expect_name("a test name");
        if (!contains(kTests, name)) unsupported(concat("the test '", name, "'"), line);
        const Token& next = current();
        bool argument_follows = next.type == TokenType::string || next.type == TokenType::integer ||
                                next.type == TokenType::floating ||
                                (next.type == TokenType::op &&
                                 (next.value == "(" || next.value == "[" || next.value == "{")) ||
                                (next.type == TokenType::name && next.value != "else" &&
                                 next.value != "or" && next.value != "and");
        if (argument_follows) unsupported(concat("an argument to the test '", name, "'"), line);
        std::vector<ExprPtr> operands;
        operands.push_back(std::move(expr));
        expr = make(ExprKind::test, line, std::move(operands));
        expr->name = std::move(name);
        expr->negated = negated;
      } else if (is_op("(")) {
        unsupported("calling the result of a filter or test", line);
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int recursion_ = 0;
};

// ---- Scoping ---------------------------------------------------------------------------------

// Jinja's symbol tracking for one frame (the template or a loop body), which decides what a name
// holds before the frame assigns it: the enclosing frame's variable (alias), the render globals
// (resolve), or Undefined when the frame's first use of it is an unconditional {% set %} and no
// enclosing frame refers to it. A loop nested in the frame sees that Undefined.
struct Symbols {
  enum class Start { resolve, alias, undefined, parameter };
  const Symbols* parent = nullptr;
  std::map<std::string, Start> references;
  std::set<std::string> stores;

  bool find(const std::string& name) const {
    return references.count(name) || (parent && parent->find(name));
  }
  void load(const std::string& name) {
    if (!find(name)) references[name] = Start::resolve;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (!references.count(name))
      references[name] = parent && parent->find(name) ? Start::alias : Start::undefined;
  }
  // Merges the if, elif and else branches: a name that not all three store starts as the
  // enclosing frame's or the globals'.
  void merge_branches(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> counts;
    for (const Symbols& branch : branches)
      for (const std::string& name : branch.stores)
        if (!stores.count(name)) ++counts[name];
    for (const Symbols& branch : branches) {
      for (const auto& [name, start] : branch.references) {
        // An Undefined start gives way to a branch that reads the name first.
        auto found = references.find(name);
        if (found == references.end() || found->second == Start::undefined)
          references[name] = start;
      }
      stores.insert(branch.stores.begin(), branch.stores.end());
    }
    for (const auto& [name, count] : counts) {
      if (count == branches.size()) continue;
      references[name] = parent && parent->find(name) ? Start::alias : Start::resolve;
    }
  }
};

void load_names(const Expr& expr, Symbols& symbols) {
  if (expr.kind == ExprKind::name) symbols.load(expr.name);
  for (const ExprPtr& operand : expr.operands)
    if (operand) load_names(*operand, symbols);
  for (const auto& keyword : expr.keywords) load_names(*keyword.second, symbols);
}

// Visits one frame's own level in order; loop bodies are frames of their own, collected in `loops`.
void visit_level(Body& body, Symbols& symbols, std::vector<Node*>& loops) {
  for (Node& node : body) {
    switch (node.kind) {
      case NodeKind::text:
        break;
      case NodeKind::output:
        load_names(*node.expression, symbols);
        break;
      case NodeKind::assign:
        load_names(*node.expression, symbols);
        if (node.attribute.empty()) {
          symbols.store(node.text);
        } else {
          symbols.load(node.text);
        }
        break;
      case NodeKind::loop:
        load_names(*node.expression, symbols);
        loops.push_back(&node);
        break;
      case NodeKind::branch: {
        // As Jinja: the first test, then three branches (body, the elifs together, else).
        load_names(*node.conditions[0], symbols);
        std::vector<Symbols> branches(3, symbols);
        visit_level(node.bodies[0], branches[0], loops);
        for (size_t index = 1; index < node.conditions.size(); ++index) {
          // Each elif is an if of its own with no else: what it stores is partial there.
          load_names(*node.conditions[index], branches[1]);
          std::vector<Symbols> elif_branches(3, branches[1]);
          visit_level(node.bodies[index], elif_branches[0], loops);
          branches[1].merge_branches(elif_branches);
        }
        visit_level(node.else_body, branches[2], loops);
        symbols.merge_branches(branches);
        break;
      }
    }
  }
}

// Analyzes a frame, then the loops in it with this frame as their parent; returns the names
// that start the frame Undefined.
std::vector<std::string> analyze_frame(Body& body, Symbols& symbols) {
  std::vector<Node*> loops;
  visit_level(body, symbols, loops);
  for (Node* loop : loops) {
    Symbols inner;
    inner.parent = &symbols;
    inner.references[loop->text] = Symbols::Start::parameter;
    inner.references["loop"] = Symbols::Start::parameter;
    loop->undefined_at_start = analyze_frame(loop->bodies[0], inner);
    Symbols else_frame;
    else_frame.parent = &symbols;
    analyze_frame(loop->else_body, else_frame);
  }
  std::vector<std::string> undefined;
  for (const auto& [name, start] : symbols.references)
    if (start == Symbols::Start::undefined) undefined.push_back(name);
  return undefined;
}

// ---- Renderer --------------------------------------------------------------------------------

// Python's slice.indices(): the positions a[start:stop:step] takes from a sequence of `length`.
std::vector<size_t> slice_positions(int64_t length, std::optional<int64_t> start,
                                    std::optional<int64_t> stop, int64_t step) {
  auto clamp = [&](std::optional<int64_t> bound, int64_t otherwise) {
    if (!bound) return otherwise;
    int64_t value = *bound < 0 ? *bound + length : *bound;
    if (step > 0) return std::clamp<int64_t>(value, 0, length);
    return std::clamp<int64_t>(value, -1, length - 1);
  };
  int64_t first = clamp(start, step > 0 ? 0 : length - 1);
  int64_t last = clamp(stop, step > 0 ? length : -1);
  std::vector<size_t> positions;
  for (int64_t index = first; step > 0 ? index < last : index > last; index += step)
    positions.push_back(static_cast<size_t>(index));
  return positions;
}

class Renderer {
 public:
  Renderer(const Dict& variables, const std::vector<std::string>& undefined_at_start,
           const ChatTemplateLimits& limits)
      : limits_(limits) {
    scopes_.push_back(variables);
    scopes_.push_back(undefined_scope(undefined_at_start));
  }

  void render(const Body& body, std::string& out) {
    for (const Node& node : body) render(node, out);
  }

 private:
  static Dict undefined_scope(const std::vector<std::string>& names) {
    Dict scope;
    for (const std::string& name : names)
      scope.emplace_back(name, TemplateValue::undefined(concat("'", name, "' is undefined")));
    return scope;
  }

  void step(int line) {
    if (++steps_ > limits_.max_steps)
      template_error(
          line, concat("the template ran past ", limits_.max_steps, " steps (a loop too long?)"));
  }

  void check_size(size_t size, int line) const {
    if (size > limits_.max_output_bytes)
      template_error(line, concat("the output would pass ", limits_.max_output_bytes, " bytes"));
  }

  void render(const Node& node, std::string& out) {
    step(node.line);
    switch (node.kind) {
      case NodeKind::text:
        check_size(out.size() + node.text.size(), node.line);
        out += node.text;
        return;
      case NodeKind::output: {
        std::string text = python_str(evaluate(*node.expression));
        check_size(out.size() + text.size(), node.line);
        out += text;
        return;
      }
      case NodeKind::branch:
        for (size_t index = 0; index < node.conditions.size(); ++index) {
          if (truthy(evaluate(*node.conditions[index]))) {
            render(node.bodies[index], out);
            return;
          }
        }
        render(node.else_body, out);
        return;
      case NodeKind::loop:
        render_loop(node, out);
        return;
      case NodeKind::assign:
        assign(node);
        return;
    }
  }

  void render_loop(const Node& node, std::string& out) {
    TemplateValue iterable = evaluate(*node.expression);
    List items = iterate(iterable, node.line);
    if (items.empty()) {
      render(node.else_body, out);
      return;
    }
    int64_t length = static_cast<int64_t>(items.size());
    for (int64_t index = 0; index < length; ++index) {
      step(node.line);
      Dict loop{{"index0", TemplateValue::integer(index)},
                {"index", TemplateValue::integer(index + 1)},
                {"revindex0", TemplateValue::integer(length - index - 1)},
                {"revindex", TemplateValue::integer(length - index)},
                {"first", TemplateValue::boolean(index == 0)},
                {"last", TemplateValue::boolean(index == length - 1)},
                {"length", TemplateValue::integer(length)}};
      if (index > 0) loop.emplace_back("previtem", items[index - 1]);
      if (index + 1 < length) loop.emplace_back("nextitem", items[index + 1]);
      Dict scope = undefined_scope(node.undefined_at_start);
      scope.emplace_back(node.text, items[index]);
      scope.emplace_back("loop", TemplateValue::dict(std::move(loop)));
      scopes_.push_back(std::move(scope));
      render(node.bodies[0], out);
      scopes_.pop_back();
    }
  }

  // The items a for loop visits: a list's items, a string's characters, a dict's keys.
  List iterate(const TemplateValue& value, int line) {
    switch (value.kind()) {
      case Kind::undefined:
        return {};
      case Kind::list:
        return value.as_list();
      case Kind::dict: {
        List keys;
        for (const auto& member : value.as_dict())
          keys.push_back(TemplateValue::string(member.first));
        return keys;
      }
      case Kind::string: {
        List characters;
        Characters split(value.as_string());
        for (size_t index = 0; index < split.size(); ++index) {
          characters.push_back(TemplateValue::string(value.as_string().substr(
              split.offsets[index], split.offsets[index + 1] - split.offsets[index])));
        }
        return characters;
      }
      default:
        template_error(line, concat("'", type_name(value), "' object is not iterable"));
    }
  }

  void assign(const Node& node) {
    TemplateValue value = evaluate(*node.expression);
    if (node.attribute.empty()) {
      Dict& scope = scopes_.back();
      for (auto& [name, existing] : scope) {
        if (name == node.text) {
          existing = std::move(value);
          return;
        }
      }
      scope.emplace_back(node.text, std::move(value));
      return;
    }
    TemplateValue target = lookup(node.text);
    if (target.kind() != Kind::name_space)
      template_error(node.line,
                     concat("cannot assign attribute on non-namespace object '", node.text, "'"));
    target.set_attribute(node.attribute, std::move(value));
  }

  TemplateValue lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      for (const auto& [key, value] : *scope)
        if (key == name) return value;
    return TemplateValue::undefined(concat("'", name, "' is undefined"));
  }

  [[noreturn]] void undefined_error(const TemplateValue& value, int line) const {
    template_error(line, value.as_string().empty() ? "a value is undefined" : value.as_string());
  }

  // Operands that may not be Undefined (Jinja's default Undefined raises on use).
  void require_defined(const TemplateValue& value, int line) const {
    if (value.is_undefined()) undefined_error(value, line);
  }

  TemplateValue make_string(std::string text, int line) const {
    check_size(text.size(), line);
    return TemplateValue::string(std::move(text));
  }

  TemplateValue evaluate(const Expr& expr) {
    step(expr.line);
    switch (expr.kind) {
      case ExprKind::literal:
        return expr.literal;
      case ExprKind::name:
        return lookup(expr.name);
      case ExprKind::list: {
        List items;
        for (const ExprPtr& operand : expr.operands) items.push_back(evaluate(*operand));
        return TemplateValue::list(std::move(items));
      }
      case ExprKind::dict: {
        Dict members;
        for (size_t index = 0; index < expr.operands.size(); index += 2) {
          TemplateValue key = evaluate(*expr.operands[index]);
          if (key.kind() != Kind::string) unsupported("a dict key that is not a string", expr.line);
          TemplateValue value = evaluate(*expr.operands[index + 1]);
          auto found = std::find_if(members.begin(), members.end(), [&](const auto& member) {
            return member.first == key.as_string();
          });
          if (found != members.end()) {
            found->second = std::move(value);
          } else {
            members.emplace_back(key.as_string(), std::move(value));
          }
        }
        return TemplateValue::dict(std::move(members));
      }
      case ExprKind::attribute:
        return get_attribute(evaluate(*expr.operands[0]), expr.name, expr.line);
      case ExprKind::subscript:
        return get_item(evaluate(*expr.operands[0]), evaluate(*expr.operands[1]), expr.line);
      case ExprKind::slice:
        return slice(expr);
      case ExprKind::negate:
      case ExprKind::plus: {
        TemplateValue value = evaluate(*expr.operands[0]);
        require_defined(value, expr.line);
        if (!is_number(value))
          template_error(expr.line, concat("bad operand type for unary ",
                                           expr.kind == ExprKind::negate ? "-" : "+", ": '",
                                           type_name(value), "'"));
        if (expr.kind == ExprKind::plus)
          return value.kind() == Kind::boolean ? TemplateValue::integer(integral_value(value))
                                               : value;
        if (value.kind() == Kind::floating) return TemplateValue::floating(-value.as_floating());
        int64_t number = integral_value(value);
        if (number == INT64_MIN) template_error(expr.line, "integer overflow");
        return TemplateValue::integer(-number);
      }
      case ExprKind::logical_not:
        return TemplateValue::boolean(!truthy(evaluate(*expr.operands[0])));
      case ExprKind::logical_and: {
        TemplateValue left = evaluate(*expr.operands[0]);
        return truthy(left) ? evaluate(*expr.operands[1]) : left;
      }
      case ExprKind::logical_or: {
        TemplateValue left = evaluate(*expr.operands[0]);
        return truthy(left) ? left : evaluate(*expr.operands[1]);
      }
      case ExprKind::conditional:
        if (truthy(evaluate(*expr.operands[0]))) return evaluate(*expr.operands[1]);
        if (expr.operands[2]) return evaluate(*expr.operands[2]);
        return TemplateValue::undefined("the conditional expression has no else branch");
      case ExprKind::binary:
        return arithmetic(expr.name, evaluate(*expr.operands[0]), evaluate(*expr.operands[1]),
                          expr.line);
      case ExprKind::concat: {
        std::string text;
        for (const ExprPtr& operand : expr.operands) {
          text += python_str(evaluate(*operand));
          check_size(text.size(), expr.line);
        }
        return TemplateValue::string(std::move(text));
      }
      case ExprKind::compare: {
        TemplateValue left = evaluate(*expr.operands[0]);
        for (size_t index = 0; index < expr.comparisons.size(); ++index) {
          TemplateValue right = evaluate(*expr.operands[index + 1]);
          if (!compare(expr.comparisons[index], left, right, expr.line))
            return TemplateValue::boolean(false);
          left = std::move(right);
        }
        return TemplateValue::boolean(true);
      }
      case ExprKind::filter:
        return apply_filter(expr);
      case ExprKind::test: {
        bool result = test(expr.name, evaluate(*expr.operands[0]));
        return TemplateValue::boolean(result != expr.negated);
      }
      case ExprKind::method:
        return call_method(expr);
      case ExprKind::function:
        return call_function(expr);
    }
    return {};
  }

  // Jinja's getattr for a.name: a dict's member or a namespace's attribute, else Undefined.
  TemplateValue get_attribute(const TemplateValue& subject, const std::string& name,
                              int line) const {
    require_defined(subject, line);
    if (subject.kind() == Kind::dict || subject.kind() == Kind::name_space) {
      if (const TemplateValue* found = subject.find(name)) return *found;
    }
    return TemplateValue::undefined(
        concat("'", object_name(subject), "' has no attribute '", name, "'"));
  }

  static std::string object_name(const TemplateValue& value) {
    return value.kind() == Kind::none ? "None" : type_name(value) + " object";
  }

  // Jinja's getitem for a[key]: a dict's member, a list's item or a string's character (negative
  // indices from the end), else Undefined.
  TemplateValue get_item(const TemplateValue& subject, const TemplateValue& key, int line) const {
    require_defined(subject, line);
    if (key.kind() == Kind::string) return get_attribute(subject, key.as_string(), line);
    if (is_integral(key) && (subject.kind() == Kind::list || subject.kind() == Kind::string)) {
      int64_t index = integral_value(key);
      if (subject.kind() == Kind::list) {
        int64_t length = static_cast<int64_t>(subject.as_list().size());
        if (index < 0) index += length;
        if (index >= 0 && index < length) return subject.as_list()[static_cast<size_t>(index)];
      } else {
        Characters characters(subject.as_string());
        int64_t length = static_cast<int64_t>(characters.size());
        if (index < 0) index += length;
        if (index >= 0 && index < length) {
          size_t position = characters.offsets[static_cast<size_t>(index)];
          return TemplateValue::string(subject.as_string().substr(
              position, characters.offsets[static_cast<size_t>(index) + 1] - position));
        }
      }
    }
    return TemplateValue::undefined(
        concat("'", object_name(subject), "' has no element ", python_repr(key)));
  }

  TemplateValue slice(const Expr& expr) {
    TemplateValue subject = evaluate(*expr.operands[0]);
    require_defined(subject, expr.line);
    std::optional<int64_t> bounds[3];
    for (int part = 0; part < 3; ++part) {
      if (!expr.operands[part + 1]) continue;
      TemplateValue bound = evaluate(*expr.operands[part + 1]);
      if (bound.kind() == Kind::none) continue;
      if (!is_integral(bound)) template_error(expr.line, "slice indices must be integers or None");
      bounds[part] = integral_value(bound);
    }
    int64_t step = bounds[2].value_or(1);
    if (step == 0) template_error(expr.line, "slice step cannot be zero");
    if (subject.kind() == Kind::list) {
      const List& items = subject.as_list();
      List result;
      for (size_t index :
           slice_positions(static_cast<int64_t>(items.size()), bounds[0], bounds[1], step))
        result.push_back(items[index]);
      return TemplateValue::list(std::move(result));
    }
    if (subject.kind() == Kind::string) {
      const std::string& text = subject.as_string();
      Characters characters(text);
      std::string result;
      for (size_t index :
           slice_positions(static_cast<int64_t>(characters.size()), bounds[0], bounds[1], step))
        result.append(text, characters.offsets[index],
                      characters.offsets[index + 1] - characters.offsets[index]);
      return TemplateValue::string(std::move(result));
    }
    return TemplateValue::undefined(concat("'", object_name(subject), "' cannot be sliced"));
  }

  TemplateValue arithmetic(const std::string& op, const TemplateValue& left,
                           const TemplateValue& right, int line) const {
    require_defined(left, line);
    require_defined(right, line);
    auto type_error = [&]() -> TemplateValue {
      template_error(line, concat("unsupported operand types for ", op, ": '", type_name(left),
                                  "' and '", type_name(right), "'"));
    };
    if (is_number(left) && is_number(right)) return number_arithmetic(op, left, right, line);
    if (op == "+") {
      if (left.kind() == Kind::string && right.kind() == Kind::string)
        return make_string(left.as_string() + right.as_string(), line);
      if (left.kind() == Kind::list && right.kind() == Kind::list) {
        check_size(left.as_list().size() + right.as_list().size(), line);
        List items = left.as_list();
        items.insert(items.end(), right.as_list().begin(), right.as_list().end());
        return TemplateValue::list(std::move(items));
      }
    }
    if (op == "*") {
      const TemplateValue& sequence = is_integral(left) ? right : left;
      const TemplateValue& count = is_integral(left) ? left : right;
      if (is_integral(count) &&
          (sequence.kind() == Kind::string || sequence.kind() == Kind::list)) {
        int64_t times = std::max<int64_t>(integral_value(count), 0);
        size_t unit = sequence.kind() == Kind::string ? sequence.as_string().size()
                                                      : sequence.as_list().size();
        if (unit > 0 && static_cast<uint64_t>(times) > limits_.max_output_bytes / unit)
          check_size(limits_.max_output_bytes + 1, line);
        if (sequence.kind() == Kind::string) {
          std::string text;
          for (int64_t index = 0; index < times; ++index) text += sequence.as_string();
          return TemplateValue::string(std::move(text));
        }
        List items;
        for (int64_t index = 0; index < times; ++index)
          items.insert(items.end(), sequence.as_list().begin(), sequence.as_list().end());
        return TemplateValue::list(std::move(items));
      }
    }
    if (op == "%" && left.kind() == Kind::string)
      unsupported("the string formatting operator '%'", line);
    return type_error();
  }

  static TemplateValue number_arithmetic(const std::string& op, const TemplateValue& left,
                                         const TemplateValue& right, int line) {
    bool integers = is_integral(left) && is_integral(right);
    if (op == "/") {
      if (numeric_value(right) == 0) template_error(line, "division by zero");
      return TemplateValue::floating(numeric_value(left) / numeric_value(right));
    }
    if (integers) {
      int64_t a = integral_value(left), b = integral_value(right), result = 0;
      bool overflow = false;
      if (op == "+") {
        overflow = __builtin_add_overflow(a, b, &result);
      } else if (op == "-") {
        overflow = __builtin_sub_overflow(a, b, &result);
      } else if (op == "*") {
        overflow = __builtin_mul_overflow(a, b, &result);
      } else if (op == "//" || op == "%") {
        if (b == 0) template_error(line, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) template_error(line, "integer overflow");
        int64_t quotient = a / b, remainder = a % b;
        if (remainder != 0 && ((remainder < 0) != (b < 0))) {
          --quotient;
          remainder += b;
        }
        result = op == "//" ? quotient : remainder;
      } else {  // **
        if (b < 0)
          return TemplateValue::floating(std::pow(static_cast<double>(a), static_cast<double>(b)));
        result = 1;
        for (int64_t index = 0; index < b && !overflow; ++index)
          overflow = __builtin_mul_overflow(result, a, &result);
      }
      if (overflow) template_error(line, "integer overflow");
      return TemplateValue::integer(result);
    }
    double a = numeric_value(left), b = numeric_value(right);
    if (op == "+") return TemplateValue::floating(a + b);
    if (op == "-") return TemplateValue::floating(a - b);
    if (op == "*") return TemplateValue::floating(a * b);
    if (op == "**") return TemplateValue::floating(std::pow(a, b));
    if (b == 0) template_error(line, "float division by zero");
    double quotient = std::floor(a / b);
    if (op == "//") return TemplateValue::floating(quotient);
    double remainder = std::fmod(a, b);
    if (remainder != 0 && ((remainder < 0) != (b < 0))) remainder += b;
    return TemplateValue::floating(remainder);
  }

  static bool equal(const TemplateValue& left, const TemplateValue& right) {
    if (is_number(left) && is_number(right)) {
      if (is_integral(left) && is_integral(right))
        return integral_value(left) == integral_value(right);
      return numeric_value(left) == numeric_value(right);
    }
    if (left.kind() != right.kind()) return false;
    switch (left.kind()) {
      case Kind::undefined:
      case Kind::none:
        return true;
      case Kind::string:
        return left.as_string() == right.as_string();
      case Kind::list:
        return std::equal(left.as_list().begin(), left.as_list().end(), right.as_list().begin(),
                          right.as_list().end(), equal);
      case Kind::dict: {
        if (left.as_dict().size() != right.as_dict().size()) return false;
        for (const auto& [key, value] : left.as_dict()) {
          const TemplateValue* other = right.find(key);
          if (!other || !equal(value, *other)) return false;
        }
        return true;
      }
      case Kind::name_space:
        return &left.as_dict() == &right.as_dict();
      default:
        return false;
    }
  }

  // Python's ordering: -1, 0 or 1; numbers, strings and lists only.
  int order(const TemplateValue& left, const TemplateValue& right, const std::string& op,
            int line) const {
    require_defined(left, line);
    require_defined(right, line);
    if (is_number(left) && is_number(right)) {
      if (is_integral(left) && is_integral(right))
        return (integral_value(left) > integral_value(right)) -
               (integral_value(left) < integral_value(right));
      double a = numeric_value(left), b = numeric_value(right);
      if (std::isnan(a) || std::isnan(b)) return 2;  // Every ordering is false.
      return (a > b) - (a < b);
    }
    if (left.kind() == Kind::string && right.kind() == Kind::string) {
      int result = left.as_string().compare(right.as_string());
      return (result > 0) - (result < 0);
    }
    if (left.kind() == Kind::list && right.kind() == Kind::list) {
      const List &a = left.as_list(), &b = right.as_list();
      for (size_t index = 0; index < a.size() && index < b.size(); ++index) {
        if (equal(a[index], b[index])) continue;
        return order(a[index], b[index], op, line);
      }
      return (a.size() > b.size()) - (a.size() < b.size());
    }
    template_error(line, concat("'", op, "' is not supported between instances of '",
                                type_name(left), "' and '", type_name(right), "'"));
  }

  bool contains_value(const TemplateValue& container, const TemplateValue& item, int line) const {
    switch (container.kind()) {
      case Kind::undefined:
        return false;
      case Kind::string:
        if (item.kind() != Kind::string)
          template_error(
              line, concat("'in <string>' requires string as left operand, not ", type_name(item)));
        return container.as_string().find(item.as_string()) != std::string::npos;
      case Kind::list:
        return std::any_of(container.as_list().begin(), container.as_list().end(),
                           [&](const TemplateValue& element) { return equal(element, item); });
      case Kind::dict:
        return item.kind() == Kind::string && container.find(item.as_string()) != nullptr;
      default:
        template_error(line,
                       concat("argument of type '", type_name(container), "' is not iterable"));
    }
  }

  bool compare(const std::string& op, const TemplateValue& left, const TemplateValue& right,
               int line) const {
    if (op == "==") return equal(left, right);
    if (op == "!=") return !equal(left, right);
    if (op == "in") return contains_value(right, left, line);
    if (op == "not in") return !contains_value(right, left, line);
    int result = order(left, right, op, line);
    if (result == 2) return false;
    if (op == "<") return result < 0;
    if (op == ">") return result > 0;
    if (op == "<=") return result <= 0;
    return result >= 0;
  }

  static bool test(const std::string& name, const TemplateValue& value) {
    Kind kind = value.kind();
    if (name == "defined") return kind != Kind::undefined;
    if (name == "undefined") return kind == Kind::undefined;
    if (name == "none") return kind == Kind::none;
    if (name == "string") return kind == Kind::string;
    if (name == "number") return is_number(value);
    if (name == "integer") return kind == Kind::integer;
    if (name == "float") return kind == Kind::floating;
    if (name == "boolean") return kind == Kind::boolean;
    if (name == "true") return kind == Kind::boolean && value.as_boolean();
    if (name == "false") return kind == Kind::boolean && !value.as_boolean();
    if (name == "mapping") return kind == Kind::dict;
    if (name == "iterable" || name == "sequence")
      return kind == Kind::undefined || kind == Kind::string || kind == Kind::list ||
             kind == Kind::dict;
    // odd, even: integers only, as Jinja's int arithmetic requires.
    int64_t number = is_integral(value) ? integral_value(value) : 0;
    bool odd = (number % 2) != 0;
    return name == "odd" ? odd : !odd;
  }

  // Positional then keyword arguments matched to `names`; a missing one stays Undefined.
  std::vector<TemplateValue> arguments(const Expr& expr, size_t first_operand,
                                       const std::vector<std::string_view>& names) {
    std::vector<TemplateValue> values(names.size());
    size_t positional = expr.operands.size() - first_operand;
    if (positional > names.size())
      template_error(expr.line,
                     concat("'", expr.name, "' takes at most ", names.size(), " arguments"));
    for (size_t index = 0; index < positional; ++index)
      values[index] = evaluate(*expr.operands[first_operand + index]);
    for (const auto& [keyword, operand] : expr.keywords) {
      auto found = std::find(names.begin(), names.end(), keyword);
      if (found == names.end())
        template_error(expr.line, concat("'", expr.name, "' has no argument '", keyword, "'"));
      values[static_cast<size_t>(found - names.begin())] = evaluate(*operand);
    }
    return values;
  }

  const std::string* optional_string(const TemplateValue& value, const Expr& expr) const {
    if (value.is_undefined() || value.kind() == Kind::none) return nullptr;
    if (value.kind() != Kind::string)
      template_error(expr.line,
                     concat("'", expr.name, "' expects a string argument, not ", type_name(value)));
    return &value.as_string();
  }

  int64_t length_of(const TemplateValue& value, int line) const {
    switch (value.kind()) {
      case Kind::undefined:
        return 0;
      case Kind::string:
        return static_cast<int64_t>(Characters(value.as_string()).size());
      case Kind::list:
        return static_cast<int64_t>(value.as_list().size());
      case Kind::dict:
        return static_cast<int64_t>(value.as_dict().size());
      default:
        template_error(line, concat("object of type '", type_name(value), "' has no len()"));
    }
  }

  TemplateValue apply_filter(const Expr& expr) {
    TemplateValue value = evaluate(*expr.operands[0]);
    const std::string& name = expr.name;
    int line = expr.line;
    if (name == "trim") {
      auto args = arguments(expr, 1, {"chars"});
      return TemplateValue::string(
          python_strip(python_str(value), optional_string(args[0], expr), true, true));
    }
    if (name == "length" || name == "count") {
      arguments(expr, 1, {});
      return TemplateValue::integer(length_of(value, line));
    }
    if (name == "tojson") {
      auto args = arguments(expr, 1, {"indent"});
      int indent = -1;
      if (!args[0].is_undefined() && args[0].kind() != Kind::none) {
        if (!is_integral(args[0])) unsupported("tojson with a non-integer indent", line);
        indent = static_cast<int>(std::clamp<int64_t>(integral_value(args[0]), 0, 64));
      }
      std::string text;
      append_json(value, indent, 0, line, text);
      return make_string(std::move(text), line);
    }
    if (name == "string") {
      arguments(expr, 1, {});
      return TemplateValue::string(python_str(value));
    }
    if (name == "upper" || name == "lower") {
      arguments(expr, 1, {});
      return TemplateValue::string(change_case(python_str(value), name == "upper"));
    }
    if (name == "default" || name == "d") {
      auto args = arguments(expr, 1, {"default_value", "boolean"});
      bool use_default = value.is_undefined() || (truthy(args[1]) && !truthy(value));
      if (!use_default) return value;
      return args[0].is_undefined() && expr.operands.size() < 2 && expr.keywords.empty()
                 ? TemplateValue::string("")
                 : args[0];
    }
    if (name == "first" || name == "last") {
      arguments(expr, 1, {});
      List items = iterate(value, line);
      if (items.empty())
        return TemplateValue::undefined(concat("'", name, "' of an empty sequence"));
      return name == "first" ? items.front() : items.back();
    }
    if (name == "join") {
      auto args = arguments(expr, 1, {"d"});
      std::string separator = args[0].is_undefined() ? "" : python_str(args[0]);
      std::string text;
      List items = iterate(value, line);
      for (size_t index = 0; index < items.size(); ++index) {
        if (index) text += separator;
        text += python_str(items[index]);
        check_size(text.size(), line);
      }
      return TemplateValue::string(std::move(text));
    }
    if (name == "reverse") {
      arguments(expr, 1, {});
      List items = iterate(value, line);
      std::reverse(items.begin(), items.end());
      if (value.kind() != Kind::string) return TemplateValue::list(std::move(items));
      std::string text;
      for (const TemplateValue& character : items) text += character.as_string();
      return TemplateValue::string(std::move(text));
    }
    if (name == "list") {
      arguments(expr, 1, {});
      return TemplateValue::list(iterate(value, line));
    }
    // replace
    auto args = arguments(expr, 1, {"old", "new", "count"});
    return replace(python_str(value), args, expr);
  }

  TemplateValue replace(const std::string& text, const std::vector<TemplateValue>& args,
                        const Expr& expr) const {
    const std::string* old_text = optional_string(args[0], expr);
    const std::string* new_text = optional_string(args[1], expr);
    if (!old_text || !new_text)
      template_error(expr.line, "replace() needs the old and new strings");
    int64_t count =
        args[2].is_undefined() || args[2].kind() == Kind::none ? -1 : integral_value(args[2]);
    std::string result;
    if (old_text->empty()) {  // Python inserts `new` between characters and at both ends.
      Characters characters(text);
      for (size_t index = 0; index <= characters.size(); ++index) {
        if (count < 0 || static_cast<int64_t>(index) < count) result += *new_text;
        if (index < characters.size())
          result.append(text, characters.offsets[index],
                        characters.offsets[index + 1] - characters.offsets[index]);
        check_size(result.size(), expr.line);
      }
      return TemplateValue::string(std::move(result));
    }
    size_t position = 0;
    for (int64_t done = 0; count < 0 || done < count; ++done) {
      size_t found = text.find(*old_text, position);
      if (found == std::string::npos) break;
      result.append(text, position, found - position);
      result += *new_text;
      check_size(result.size(), expr.line);
      position = found + old_text->size();
    }
    result.append(text, position);
    return make_string(std::move(result), expr.line);
  }

  TemplateValue call_method(const Expr& expr) {
    TemplateValue subject = evaluate(*expr.operands[0]);
    const std::string& name = expr.name;
    int line = expr.line;
    require_defined(subject, line);
    if (subject.kind() == Kind::dict) {
      if (name == "get") {
        auto args = arguments(expr, 1, {"key", "default"});
        const TemplateValue* found =
            args[0].kind() == Kind::string ? subject.find(args[0].as_string()) : nullptr;
        if (found) return *found;
        return args[1].is_undefined() ? TemplateValue::none() : args[1];
      }
      if (name == "keys" || name == "values") {  // As lists: printing them is not supported.
        arguments(expr, 1, {});
        List items;
        for (const auto& [key, value] : subject.as_dict())
          items.push_back(name == "keys" ? TemplateValue::string(key) : value);
        return TemplateValue::list(std::move(items));
      }
    }
    if (subject.kind() != Kind::string)
      template_error(line, concat("'", object_name(subject), "' has no attribute '", name, "'"));
    const std::string& text = subject.as_string();
    if (name == "startswith" || name == "endswith") {
      auto args = arguments(expr, 1, {"prefix"});
      if (args[0].kind() != Kind::string)
        template_error(line, concat(name, "() expects a string, not ", type_name(args[0])));
      const std::string& affix = args[0].as_string();
      bool fits = affix.size() <= text.size();
      if (name == "startswith")
        return TemplateValue::boolean(fits && text.compare(0, affix.size(), affix) == 0);
      return TemplateValue::boolean(
          fits && text.compare(text.size() - affix.size(), affix.size(), affix) == 0);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      auto args = arguments(expr, 1, {"chars"});
      return TemplateValue::string(
          python_strip(text, optional_string(args[0], expr), name != "rstrip", name != "lstrip"));
    }
    if (name == "upper" || name == "lower") {
      arguments(expr, 1, {});
      return TemplateValue::string(change_case(text, name == "upper"));
    }
    if (name == "split") {
      auto args = arguments(expr, 1, {"sep", "maxsplit"});
      int64_t limit = args[1].is_undefined() ? -1 : integral_value(args[1]);
      return TemplateValue::list(split(text, optional_string(args[0], expr), limit, line));
    }
    if (name == "replace") {
      return replace(text, arguments(expr, 1, {"old", "new", "count"}), expr);
    }
    template_error(line, concat("'str object' has no attribute '", name, "'"));
  }

  // Python's str.split: by `separator`, or by whitespace runs when it is null.
  static List split(const std::string& text, const std::string* separator, int64_t limit,
                    int line) {
    List parts;
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

  TemplateValue call_function(const Expr& expr) {
    int line = expr.line;
    if (expr.name == "raise_exception") {
      auto args = arguments(expr, 0, {"message"});
      fail("chat template: ", python_str(args[0]));
    }
    if (expr.name == "namespace") {
      if (!expr.operands.empty()) unsupported("namespace() with positional arguments", line);
      Dict attributes;
      for (const auto& [keyword, operand] : expr.keywords)
        attributes.emplace_back(keyword, evaluate(*operand));
      return TemplateValue::name_space(std::move(attributes));
    }
    // range
    auto args = arguments(expr, 0, {"start", "stop", "step"});
    for (const TemplateValue& arg : args)
      if (!arg.is_undefined() && !is_integral(arg))
        template_error(line, concat("range() expects integers, not ", type_name(arg)));
    int64_t start = 0, stop = 0, step_size = 1;
    if (args[1].is_undefined()) {
      stop = integral_value(args[0]);
    } else {
      start = integral_value(args[0]);
      stop = integral_value(args[1]);
      if (!args[2].is_undefined()) step_size = integral_value(args[2]);
    }
    if (step_size == 0) template_error(line, "range() arg 3 must not be zero");
    List numbers;
    for (int64_t value = start; step_size > 0 ? value < stop : value > stop; value += step_size) {
      check_size(numbers.size() + 1, line);
      step(line);
      numbers.push_back(TemplateValue::integer(value));
      if ((step_size > 0 && value > INT64_MAX - step_size) ||
          (step_size < 0 && value < INT64_MIN - step_size))
        break;
    }
    return TemplateValue::list(std::move(numbers));
  }

  const ChatTemplateLimits& limits_;
  std::vector<Dict> scopes_;
  size_t steps_ = 0;
};

// The template: a string, or a list of {"name", "template"} of which "default" is the chat one.
std::optional<std::string> read_chat_template(JsonScanner& scanner) {
  const std::string field = "chat_template";
  if (scanner.null()) return std::nullopt;
  if (scanner.peek() != '[') return std::string(scanner.string(field));
  std::optional<std::string> chosen;
  scanner.for_each_element(field, [&](size_t) {
    std::string name, source;
    scanner.for_each_member(field, [&](std::string_view key) {
      std::string member(key);
      if (member == "name" || member == "template") {
        (member == "name" ? name : source) = std::string(scanner.string(field + "." + member));
      } else {
        scanner.skip_value(field);
      }
    });
    if (name == "default") chosen = source;
  });
  return chosen;
}

}  // namespace

// ---- Public ----------------------------------------------------------------------------------

std::optional<std::string> read_token_name(JsonScanner& scanner, const std::string& field) {
  if (scanner.null()) return std::nullopt;
  if (scanner.peek() != '{') return std::string(scanner.string(field));
  std::optional<std::string> content;
  scanner.for_each_member(field, [&](std::string_view key) {
    if (key == "content" && !scanner.null()) {
      content = std::string(scanner.string(field + ".content"));
    } else {
      scanner.skip_value(field);
    }
  });
  return content;
}

TemplateValue TemplateValue::undefined(std::string description) {
  TemplateValue value;
  value.string_ = std::move(description);
  return value;
}

TemplateValue TemplateValue::none() {
  TemplateValue value;
  value.kind_ = Kind::none;
  return value;
}

TemplateValue TemplateValue::boolean(bool boolean) {
  TemplateValue value;
  value.kind_ = Kind::boolean;
  value.boolean_ = boolean;
  return value;
}

TemplateValue TemplateValue::integer(int64_t integer) {
  TemplateValue value;
  value.kind_ = Kind::integer;
  value.integer_ = integer;
  return value;
}

TemplateValue TemplateValue::floating(double floating) {
  TemplateValue value;
  value.kind_ = Kind::floating;
  value.floating_ = floating;
  return value;
}

TemplateValue TemplateValue::string(std::string text) {
  TemplateValue value;
  value.kind_ = Kind::string;
  value.string_ = std::move(text);
  return value;
}

TemplateValue TemplateValue::list(List items) {
  TemplateValue value;
  value.kind_ = Kind::list;
  value.list_ = std::make_shared<const List>(std::move(items));
  return value;
}

TemplateValue TemplateValue::dict(Dict members) {
  TemplateValue value;
  value.kind_ = Kind::dict;
  value.dict_ = std::make_shared<Dict>(std::move(members));
  return value;
}

TemplateValue TemplateValue::name_space(Dict attributes) {
  TemplateValue value = dict(std::move(attributes));
  value.kind_ = Kind::name_space;
  return value;
}

TemplateValue TemplateValue::from_json(std::string_view json) {
  nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(json.begin(), json.end(), nullptr, false);
  if (parsed.is_discarded()) fail("template values: not valid JSON");
  return value_from_json(parsed);
}

const TemplateValue* TemplateValue::find(std::string_view key) const {
  if (!dict_) return nullptr;
  for (const auto& [name, value] : *dict_)
    if (name == key) return &value;
  return nullptr;
}

void TemplateValue::set_attribute(const std::string& name, TemplateValue value) const {
  for (auto& [key, existing] : *dict_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  dict_->emplace_back(name, std::move(value));
}

struct ChatTemplate::Program {
  Body body;
  std::vector<std::string> undefined_at_start;
};

ChatTemplate::ChatTemplate(std::string_view source) : program_(std::make_unique<Program>()) {
  size_t invalid = first_invalid_utf8(source);
  if (invalid != std::string_view::npos)
    fail("chat template: not valid UTF-8 at byte offset ", invalid);
  program_->body = Parser(Lexer(source).tokenize()).parse_template();
  Symbols root;
  program_->undefined_at_start = analyze_frame(program_->body, root);
}

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const TemplateValue::Dict& variables,
                                 const ChatTemplateLimits& limits) const {
  std::string out;
  Renderer(variables, program_->undefined_at_start, limits).render(program_->body, out);
  return out;
}

ChatTemplateConfig read_chat_template_config(std::string_view json,
                                             const std::string& source_name) {
  ChatTemplateConfig settings;
  JsonScanner scanner(json, source_name);
  scanner.for_each_member("", [&](std::string_view key) {
    std::string name(key);
    if (name == "chat_template") {
      settings.chat_template = read_chat_template(scanner);
    } else if (name == "bos_token") {
      settings.bos_token = read_token_name(scanner, name);
    } else if (name == "eos_token") {
      settings.eos_token = read_token_name(scanner, name);
    } else {
      scanner.skip_value(name);
    }
  });
  return settings;
}

TemplateValue::Dict chat_template_variables(const ChatTemplateConfig& config,
                                            TemplateValue messages, bool add_generation_prompt) {
  TemplateValue::Dict variables{
      {"messages", std::move(messages)},
      {"add_generation_prompt", TemplateValue::boolean(add_generation_prompt)},
      {"tools", TemplateValue::none()},
      {"documents", TemplateValue::none()}};
  if (config.bos_token)
    variables.emplace_back("bos_token", TemplateValue::string(*config.bos_token));
  if (config.eos_token)
    variables.emplace_back("eos_token", TemplateValue::string(*config.eos_token));
  return variables;
}

}  // namespace fornace::text
