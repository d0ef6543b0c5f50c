// Python's operators on template values: arithmetic, equality, ordering and membership.
#include "text/jinja/operators.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/error.h"

namespace fornace::text::jinja {
namespace {

TemplateValue sized_string(std::string text, size_t max_bytes, int line) {
  check_size(text.size(), max_bytes, line);
  return TemplateValue::string(std::move(text));
}

TemplateValue number_arithmetic(const std::string& op, const TemplateValue& left,
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

// Python's ordering: -1, 0 or 1; numbers, strings and lists only.
int order(const TemplateValue& left, const TemplateValue& right, const std::string& op, int line) {
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
  template_error(line, concat("'", op, "' is not supported between instances of '", type_name(left),
                              "' and '", type_name(right), "'"));
}

bool contains_value(const TemplateValue& container, const TemplateValue& item, int line) {
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
      template_error(line, concat("argument of type '", type_name(container), "' is not iterable"));
  }
}

}  // namespace

bool equal(const TemplateValue& left, const TemplateValue& right) {
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

TemplateValue arithmetic(const std::string& op, const TemplateValue& left,
                         const TemplateValue& right, int line, size_t max_bytes) {
  require_defined(left, line);
  require_defined(right, line);
  auto type_error = [&]() -> TemplateValue {
    template_error(line, concat("unsupported operand types for ", op, ": '", type_name(left),
                                "' and '", type_name(right), "'"));
  };
  if (is_number(left) && is_number(right)) return number_arithmetic(op, left, right, line);
  if (op == "+") {
    if (left.kind() == Kind::string && right.kind() == Kind::string)
      return sized_string(left.as_string() + right.as_string(), max_bytes, line);
    if (left.kind() == Kind::list && right.kind() == Kind::list) {
      check_size(left.as_list().size() + right.as_list().size(), max_bytes, line);
      List items = left.as_list();
      items.insert(items.end(), right.as_list().begin(), right.as_list().end());
      return TemplateValue::list(std::move(items));
    }
  }
  if (op == "*") {
    const TemplateValue& sequence = is_integral(left) ? right : left;
    const TemplateValue& count = is_integral(left) ? left : right;
    if (is_integral(count) && (sequence.kind() == Kind::string || sequence.kind() == Kind::list)) {
      int64_t times = std::max<int64_t>(integral_value(count), 0);
      size_t unit =
          sequence.kind() == Kind::string ? sequence.as_string().size() : sequence.as_list().size();
      if (unit > 0 && static_cast<uint64_t>(times) > max_bytes / unit)
        check_size(max_bytes + 1, max_bytes, line);
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

bool compare(const std::string& op, const TemplateValue& left, const TemplateValue& right,
             int line) {
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

}  // namespace fornace::text::jinja
