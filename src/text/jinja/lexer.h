// The lexer: a template's text and tags as tokens, with Jinja's whitespace rules applied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fornace::text::jinja {

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

// Tokenizes a template as transformers' Jinja environment does (trim_blocks, lstrip_blocks, no
// trailing newline kept). Throws Error naming the line on a syntax error.
std::vector<Token> tokenize(std::string_view source);

}  // namespace fornace::text::jinja
