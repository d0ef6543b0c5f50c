// The tree walker: statements, expressions, scopes and the limits on steps and sizes.
#include "text/jinja/render.h"

#include <algorithm>
#include <optional>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/operators.h"
#include "text/jinja/text.h"

namespace fornace::text::jinja {
namespace {

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

Dict undefined_scope(const std::vector<std::string>& names) {
  Dict scope;
  for (const std::string& name : names)
    scope.emplace_back(name, TemplateValue::undefined(concat("'", name, "' is undefined")));
  return scope;
}

}  // namespace

Renderer::Renderer(const Dict& variables, const std::vector<std::string>& undefined_at_start,
                   const ChatTemplateLimits& limits)
    : limits_(limits) {
  scopes_.push_back(variables);
  scopes_.push_back(undefined_scope(undefined_at_start));
}

void Renderer::render(const Body& body, std::string& out) {
  for (const Node& node : body) render(node, out);
}

void Renderer::step(int line) {
  if (++steps_ > limits_.max_steps)
    template_error(
        line, concat("the template ran past ", limits_.max_steps, " steps (a loop too long?)"));
}

void Renderer::check_size(size_t size, int line) const {
  jinja::check_size(size, limits_.max_output_bytes, line);
}

void Renderer::render(const Node& node, std::string& out) {
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

void Renderer::render_loop(const Node& node, std::string& out) {
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
List Renderer::iterate(const TemplateValue& value, int line) {
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

void Renderer::assign(const Node& node) {
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

TemplateValue Renderer::lookup(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
    for (const auto& [key, value] : *scope)
      if (key == name) return value;
  return TemplateValue::undefined(concat("'", name, "' is undefined"));
}

TemplateValue Renderer::make_string(std::string text, int line) const {
  check_size(text.size(), line);
  return TemplateValue::string(std::move(text));
}

TemplateValue Renderer::evaluate(const Expr& expr) {
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
                        expr.line, limits_.max_output_bytes);
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
      return apply_filter(*this, expr);
    case ExprKind::test: {
      bool result = apply_test(expr.name, evaluate(*expr.operands[0]));
      return TemplateValue::boolean(result != expr.negated);
    }
    case ExprKind::method:
      return call_method(*this, expr);
    case ExprKind::function:
      return call_function(*this, expr);
  }
  return {};
}

// Jinja's getattr for a.name: a dict's member or a namespace's attribute, else Undefined.
TemplateValue Renderer::get_attribute(const TemplateValue& subject, const std::string& name,
                                      int line) const {
  require_defined(subject, line);
  if (subject.kind() == Kind::dict || subject.kind() == Kind::name_space) {
    if (const TemplateValue* found = subject.find(name)) return *found;
  }
  return TemplateValue::undefined(
      concat("'", object_name(subject), "' has no attribute '", name, "'"));
}

// Jinja's getitem for a[key]: a dict's member, a list's item or a string's character (negative
// indices from the end), else Undefined.
TemplateValue Renderer::get_item(const TemplateValue& subject, const TemplateValue& key,
                                 int line) const {
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

TemplateValue Renderer::slice(const Expr& expr) {
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

// Positional then keyword arguments matched to `names`; a missing one stays Undefined.
std::vector<TemplateValue> Renderer::arguments(const Expr& expr, size_t first_operand,
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

}  // namespace fornace::text::jinja
