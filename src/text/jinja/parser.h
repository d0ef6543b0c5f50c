// The parser: tokens to a tree, refusing at parse time what the subset lacks.
#pragma once

#include <vector>

#include "text/jinja/lexer.h"
#include "text/jinja/tree.h"

namespace fornace::text::jinja {

// Parses a template's tokens. Throws Error for syntax errors and for anything outside the subset
// (naming it, its line and --prompt as the way around).
Body parse(std::vector<Token> tokens);

}  // namespace fornace::text::jinja
