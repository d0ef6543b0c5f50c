// The interpreter's three kinds of error: what the subset lacks, syntax errors, run-time errors.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/error.h"

namespace fornace::text::jinja {

inline constexpr std::string_view kWayAround =
    "; pass the prompt text as the model expects it with --prompt instead";

[[noreturn]] inline void unsupported(std::string_view what, int line) {
  fail("chat template: ", what, " at line ", line, " is not supported", kWayAround);
}

[[noreturn]] inline void syntax_error(int line, std::string_view what) {
  fail("chat template: line ", line, ": ", what, kWayAround);
}

[[noreturn]] inline void template_error(int line, std::string_view what) {
  fail("chat template: line ", line, ": ", what);
}

// Throws when a string or list of `size` would pass `max_bytes`.
inline void check_size(size_t size, size_t max_bytes, int line) {
  if (size > max_bytes) template_error(line, concat("the output would pass ", max_bytes, " bytes"));
}

}  // namespace fornace::text::jinja
