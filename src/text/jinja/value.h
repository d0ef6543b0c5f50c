// Template values (Python's types, Jinja's Undefined), render limits, and Python's semantics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fornace::text {

// A value as a template sees it: Jinja's Undefined, or Python's None, bool, int, float, str,
// list, dict (keys in insertion order) or a namespace() object.
class TemplateValue {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, name_space };
  using List = std::vector<TemplateValue>;
  using Dict = std::vector<std::pair<std::string, TemplateValue>>;

  TemplateValue() = default;  // Undefined.
  // Undefined; `description` says what was missing, for error messages ("'x' is undefined").
  static TemplateValue undefined(std::string description);
  static TemplateValue none();
  static TemplateValue boolean(bool value);
  static TemplateValue integer(int64_t value);
  static TemplateValue floating(double value);
  static TemplateValue string(std::string value);
  static TemplateValue list(List items);
  static TemplateValue dict(Dict members);
  // A namespace() object: attributes that `{% set ns.name = ... %}` changes in place.
  static TemplateValue name_space(Dict attributes);
  // JSON text as values: objects become dicts (keys in order), arrays lists, null None. Throws
  // Error naming `what` on bad JSON.
  static TemplateValue from_json(std::string_view json, std::string_view what = "template values");

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool as_boolean() const { return boolean_; }
  int64_t as_integer() const { return integer_; }
  double as_floating() const { return floating_; }
  // The string, or for an undefined value its description.
  const std::string& as_string() const { return string_; }
  const List& as_list() const { return *list_; }
  // The members of a dict, or the attributes of a namespace.
  const Dict& as_dict() const { return *dict_; }
  // The member named `key` of a dict or namespace, or nullptr.
  const TemplateValue* find(std::string_view key) const;
  // Sets a namespace attribute; the change is seen through every copy of this value.
  void set_attribute(const std::string& name, TemplateValue value) const;

 private:
  Kind kind_ = Kind::undefined;
  bool boolean_ = false;
  int64_t integer_ = 0;
  double floating_ = 0;
  std::string string_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;  // Shared and mutable only for a namespace.
};

// Bounds that keep a hostile template from exhausting the process.
struct ChatTemplateLimits {
  size_t max_output_bytes = size_t{64} << 20;  // Also bounds any one string or list built.
  size_t max_steps = 20'000'000;               // Statements and expressions evaluated.
};

namespace jinja {

using Kind = TemplateValue::Kind;
using List = TemplateValue::List;
using Dict = TemplateValue::Dict;

bool is_number(const TemplateValue& value);
// bool counts as int, as in Python.
bool is_integral(const TemplateValue& value);
int64_t integral_value(const TemplateValue& value);
double numeric_value(const TemplateValue& value);
// Python's type names, for error messages.
std::string type_name(const TemplateValue& value);
// "None", or "<type> object", as Jinja names a value in its error messages.
std::string object_name(const TemplateValue& value);
bool truthy(const TemplateValue& value);

// Python's repr() of a float: the shortest round-trip digits, fixed between 1e-4 and 1e16.
std::string python_float(double value);
// Python's repr() of a str.
std::string python_repr_string(std::string_view text);
std::string python_repr(const TemplateValue& value);
// Python's str() of a value; Undefined is "" as Jinja's default Undefined prints.
std::string python_str(const TemplateValue& value);
// json.dumps(value, ensure_ascii=False, indent=indent) appended to `out`, as transformers'
// tojson filter calls it; indent < 0 means none. Errors name `line`.
void append_json(const TemplateValue& value, int indent, int level, int line, std::string& out);

// Operands that may not be Undefined (Jinja's default Undefined raises on use).
[[noreturn]] void undefined_error(const TemplateValue& value, int line);
void require_defined(const TemplateValue& value, int line);

}  // namespace jinja
}  // namespace fornace::text
