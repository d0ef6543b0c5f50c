// Python's operators on template values: arithmetic, equality, ordering and membership.
#pragma once

#include <cstddef>
#include <string>

#include "text/jinja/value.h"

namespace fornace::text::jinja {

// left <op> right for + - * / // % **; a string or list built is bounded by `max_bytes`.
TemplateValue arithmetic(const std::string& op, const TemplateValue& left,
                         const TemplateValue& right, int line, size_t max_bytes);

// Python's ==.
bool equal(const TemplateValue& left, const TemplateValue& right);

// left <op> right for == != < > <= >= in, not in.
bool compare(const std::string& op, const TemplateValue& left, const TemplateValue& right,
             int line);

}  // namespace fornace::text::jinja
