// The lexer: Jinja's whitespace rules (trim_blocks, lstrip_blocks, '-' '+'), Python's literals.
#include "text/jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "text/jinja/error.h"
#include "text/jinja/text.h"
#include "text/utf8.h"

namespace fornace::text::jinja {
namespace {

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

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).tokenize(); }

}  // namespace fornace::text::jinja
