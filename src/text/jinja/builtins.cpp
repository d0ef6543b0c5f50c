// The filters, tests, string and dict methods and global functions templates may call.
#include "text/jinja/builtins.h"

#include <algorithm>

#include "text/jinja/error.h"
#include "text/jinja/text.h"

namespace fornace::text::jinja {
namespace {

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

const std::string* optional_string(const TemplateValue& value, const Expr& expr) {
  if (value.is_undefined() || value.kind() == Kind::none) return nullptr;
  if (value.kind() != Kind::string)
    template_error(expr.line,
                   concat("'", expr.name, "' expects a string argument, not ", type_name(value)));
  return &value.as_string();
}

int64_t length_of(const TemplateValue& value, int line) {
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

TemplateValue replace(Renderer& renderer, const std::string& text,
                      const std::vector<TemplateValue>& args, const Expr& expr) {
  const std::string* old_text = optional_string(args[0], expr);
  const std::string* new_text = optional_string(args[1], expr);
  if (!old_text || !new_text) template_error(expr.line, "replace() needs the old and new strings");
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
      renderer.check_size(result.size(), expr.line);
    }
    return TemplateValue::string(std::move(result));
  }
  size_t position = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t found = text.find(*old_text, position);
    if (found == std::string::npos) break;
    result.append(text, position, found - position);
    result += *new_text;
    renderer.check_size(result.size(), expr.line);
    position = found + old_text->size();
  }
  result.append(text, position);
  return renderer.make_string(std::move(result), expr.line);
}

}  // namespace

bool is_filter(std::string_view name) { return contains(kFilters, name); }
bool is_test(std::string_view name) { return contains(kTests, name); }
bool is_method(std::string_view name) { return contains(kMethods, name); }
bool is_function(std::string_view name) { return contains(kFunctions, name); }

bool apply_test(const std::string& name, const TemplateValue& value) {
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

TemplateValue apply_filter(Renderer& renderer, const Expr& expr) {
  TemplateValue value = renderer.evaluate(*expr.operands[0]);
  const std::string& name = expr.name;
  int line = expr.line;
  if (name == "trim") {
    auto args = renderer.arguments(expr, 1, {"chars"});
    return TemplateValue::string(
        python_strip(python_str(value), optional_string(args[0], expr), true, true));
  }
  if (name == "length" || name == "count") {
    renderer.arguments(expr, 1, {});
    return TemplateValue::integer(length_of(value, line));
  }
  if (name == "tojson") {
    auto args = renderer.arguments(expr, 1, {"indent"});
    int indent = -1;
    if (!args[0].is_undefined() && args[0].kind() != Kind::none) {
      if (!is_integral(args[0])) unsupported("tojson with a non-integer indent", line);
      indent = static_cast<int>(std::clamp<int64_t>(integral_value(args[0]), 0, 64));
    }
    std::string text;
    append_json(value, indent, 0, line, text);
    return renderer.make_string(std::move(text), line);
  }
  if (name == "string") {
    renderer.arguments(expr, 1, {});
    return TemplateValue::string(python_str(value));
  }
  if (name == "upper" || name == "lower") {
    renderer.arguments(expr, 1, {});
    return TemplateValue::string(change_case(python_str(value), name == "upper"));
  }
  if (name == "default" || name == "d") {
    auto args = renderer.arguments(expr, 1, {"default_value", "boolean"});
    bool use_default = value.is_undefined() || (truthy(args[1]) && !truthy(value));
    if (!use_default) return value;
    return args[0].is_undefined() && expr.operands.size() < 2 && expr.keywords.empty()
               ? TemplateValue::string("")
               : args[0];
  }
  if (name == "first" || name == "last") {
    renderer.arguments(expr, 1, {});
    List items = renderer.iterate(value, line);
    if (items.empty()) return TemplateValue::undefined(concat("'", name, "' of an empty sequence"));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    auto args = renderer.arguments(expr, 1, {"d"});
    std::string separator = args[0].is_undefined() ? "" : python_str(args[0]);
    std::string text;
    List items = renderer.iterate(value, line);
    for (size_t index = 0; index < items.size(); ++index) {
      if (index) text += separator;
      text += python_str(items[index]);
      renderer.check_size(text.size(), line);
    }
    return TemplateValue::string(std::move(text));
  }
  if (name == "reverse") {
    renderer.arguments(expr, 1, {});
    List items = renderer.iterate(value, line);
    std::reverse(items.begin(), items.end());
    if (value.kind() != Kind::string) return TemplateValue::list(std::move(items));
    std::string text;
    for (const TemplateValue& character : items) text += character.as_string();
    return TemplateValue::string(std::move(text));
  }
  if (name == "list") {
    renderer.arguments(expr, 1, {});
    return TemplateValue::list(renderer.iterate(value, line));
  }
  // replace
  auto args = renderer.arguments(expr, 1, {"old", "new", "count"});
  return replace(renderer, python_str(value), args, expr);
}

TemplateValue call_method(Renderer& renderer, const Expr& expr) {
  TemplateValue subject = renderer.evaluate(*expr.operands[0]);
  const std::string& name = expr.name;
  int line = expr.line;
  require_defined(subject, line);
  if (subject.kind() == Kind::dict) {
    if (name == "get") {
      auto args = renderer.arguments(expr, 1, {"key", "default"});
      const TemplateValue* found =
          args[0].kind() == Kind::string ? subject.find(args[0].as_string()) : nullptr;
      if (found) return *found;
      return args[1].is_undefined() ? TemplateValue::none() : args[1];
    }
    if (name == "keys" || name == "values") {  // As lists: printing them is not supported.
      renderer.arguments(expr, 1, {});
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
    auto args = renderer.arguments(expr, 1, {"prefix"});
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
    auto args = renderer.arguments(expr, 1, {"chars"});
    return TemplateValue::string(
        python_strip(text, optional_string(args[0], expr), name != "rstrip", name != "lstrip"));
  }
  if (name == "upper" || name == "lower") {
    renderer.arguments(expr, 1, {});
    return TemplateValue::string(change_case(text, name == "upper"));
  }
  if (name == "split") {
    auto args = renderer.arguments(expr, 1, {"sep", "maxsplit"});
    int64_t limit = args[1].is_undefined() ? -1 : integral_value(args[1]);
    return TemplateValue::list(python_split(text, optional_string(args[0], expr), limit, line));
  }
  if (name == "replace") {
    return replace(renderer, text, renderer.arguments(expr, 1, {"old", "new", "count"}), expr);
  }
  template_error(line, concat("'str object' has no attribute '", name, "'"));
}

TemplateValue call_function(Renderer& renderer, const Expr& expr) {
  int line = expr.line;
  if (expr.name == "raise_exception") {
    auto args = renderer.arguments(expr, 0, {"message"});
    fail("chat template: ", python_str(args[0]));
  }
  if (expr.name == "namespace") {
    if (!expr.operands.empty()) unsupported("namespace() with positional arguments", line);
    Dict attributes;
    for (const auto& [keyword, operand] : expr.keywords)
      attributes.emplace_back(keyword, renderer.evaluate(*operand));
    return TemplateValue::name_space(std::move(attributes));
  }
  // range
  auto args = renderer.arguments(expr, 0, {"start", "stop", "step"});
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
    renderer.check_size(numbers.size() + 1, line);
    renderer.step(line);
    numbers.push_back(TemplateValue::integer(value));
    if ((step_size > 0 && value > INT64_MAX - step_size) ||
        (step_size < 0 && value < INT64_MIN - step_size))
      break;
  }
  return TemplateValue::list(std::move(numbers));
}

}  // namespace fornace::text::jinja
