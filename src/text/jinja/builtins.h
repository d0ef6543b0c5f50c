// The filters, tests, string and dict methods and global functions templates may call.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/render.h"

namespace fornace::text::jinja {

// Whether the subset has a filter, test, method or global function of this name (the parser
// refuses the others).
bool is_filter(std::string_view name);
bool is_test(std::string_view name);
bool is_method(std::string_view name);
bool is_function(std::string_view name);

// expr: value | name(arguments).
TemplateValue apply_filter(Renderer& renderer, const Expr& expr);
// value is name.
bool apply_test(const std::string& name, const TemplateValue& value);
// expr: subject.name(arguments).
TemplateValue call_method(Renderer& renderer, const Expr& expr);
// expr: name(arguments): raise_exception, namespace, range.
TemplateValue call_function(Renderer& renderer, const Expr& expr);

}  // namespace fornace::text::jinja
