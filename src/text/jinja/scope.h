// Jinja's scoping rules, decided once after parsing.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/tree.h"

namespace fornace::text::jinja {

// Jinja's symbol tracking over the template and each loop body: fills each loop's
// undefined_at_start and returns the names that start the template Undefined.
std::vector<std::string> analyze_scopes(Body& body);

}  // namespace fornace::text::jinja
