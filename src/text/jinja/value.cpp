// TemplateValue and Python's semantics for it: truth, str(), repr(), json.dumps.
#include "text/jinja/value.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "text/jinja/error.h"
#include "text/jinja/text.h"

namespace fornace::text {

namespace jinja {

bool is_number(const TemplateValue& value) {
  return value.kind() == Kind::boolean || value.kind() == Kind::integer ||
         value.kind() == Kind::floating;
}

// bool counts as int, as in Python.
bool is_integral(const TemplateValue& value) {
  return value.kind() == Kind::boolean || value.kind() == Kind::integer;
}

int64_t integral_value(const TemplateValue& value) {
  return value.kind() == Kind::boolean ? (value.as_boolean() ? 1 : 0) : value.as_integer();
}

double numeric_value(const TemplateValue& value) {
  return value.kind() == Kind::floating ? value.as_floating()
                                        : static_cast<double>(integral_value(value));
}

// Python's type names, for error messages.
std::string type_name(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::list:
      return "list";
    case Kind::dict:
      return "dict";
    case Kind::name_space:
      return "Namespace";
  }
  return "?";
}

bool truthy(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return value.as_boolean();
    case Kind::integer:
      return value.as_integer() != 0;
    case Kind::floating:
      return value.as_floating() != 0;
    case Kind::string:
      return !value.as_string().empty();
    case Kind::list:
      return !value.as_list().empty();
    case Kind::dict:
      return !value.as_dict().empty();
    case Kind::name_space:
      return true;
  }
  return false;
}

// Python's repr() of a float: the shortest round-trip digits, fixed between 1e-4 and 1e16.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  size_t e = scientific.find('e');
  int exponent = std::stoi(scientific.substr(e + 1));
  std::string mantissa = scientific.substr(0, e);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string text = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      text += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      text += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      text += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return text;
  }
  text += digits.substr(0, 1);
  if (digits.size() > 1) text += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return text + exponent_text;
}

// Python's repr() of a str.
std::string python_repr_string(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t position = 0; position < text.size();) {
    size_t length = 0;
    uint32_t c = decode_at(text, position, length);
    char escape[16];
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      std::snprintf(escape, sizeof(escape), "\\udc%02x", c & 0xFF);
      out += escape;
    } else if (c == ' ' || (c > 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
    } else {
      auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      bool printable = c >= 0x7F && category != UTF8PROC_CATEGORY_CC &&
                       category != UTF8PROC_CATEGORY_CF && category != UTF8PROC_CATEGORY_CS &&
                       category != UTF8PROC_CATEGORY_CO && category != UTF8PROC_CATEGORY_CN &&
                       category != UTF8PROC_CATEGORY_ZL && category != UTF8PROC_CATEGORY_ZP &&
                       category != UTF8PROC_CATEGORY_ZS;
      if (printable) {
        out.append(text.substr(position, length));
      } else {
        std::snprintf(escape, sizeof(escape),
                      c < 0x100     ? "\\x%02x"
                      : c < 0x10000 ? "\\u%04x"
                                    : "\\U%08x",
                      c);
        out += escape;
      }
    }
    position += length;
  }
  return out + quote;
}

std::string python_repr(const TemplateValue& value) {
  return value.kind() == Kind::string ? python_repr_string(value.as_string()) : python_str(value);
}

// Python's str() of a value; Undefined is "" as Jinja's default Undefined prints.
std::string python_str(const TemplateValue& value) {
  switch (value.kind()) {
    case Kind::undefined:
      return "";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return value.as_boolean() ? "True" : "False";
    case Kind::integer:
      return std::to_string(value.as_integer());
    case Kind::floating:
      return python_float(value.as_floating());
    case Kind::string:
      return value.as_string();
    case Kind::list: {
      std::string out = "[";
      for (size_t index = 0; index < value.as_list().size(); ++index) {
        if (index) out += ", ";
        const TemplateValue& item = value.as_list()[index];
        out += item.is_undefined() ? "Undefined" : python_repr(item);
      }
      return out + "]";
    }
    case Kind::dict:
    case Kind::name_space: {
      std::string out = value.kind() == Kind::dict ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : value.as_dict()) {
        if (!first) out += ", ";
        first = false;
        out += python_repr_string(key) + ": " +
               (item.is_undefined() ? "Undefined" : python_repr(item));
      }
      return out + (value.kind() == Kind::dict ? "}" : "}>");
    }
  }
  return "";
}

std::string object_name(const TemplateValue& value) {
  return value.kind() == Kind::none ? "None" : type_name(value) + " object";
}

[[noreturn]] void undefined_error(const TemplateValue& value, int line) {
  template_error(line, value.as_string().empty() ? "a value is undefined" : value.as_string());
}

// Operands that may not be Undefined (Jinja's default Undefined raises on use).
void require_defined(const TemplateValue& value, int line) {
  if (value.is_undefined()) undefined_error(value, line);
}

// json.dumps(value, ensure_ascii=False, indent=indent), as transformers' tojson filter calls it.
void append_json(const TemplateValue& value, int indent, int level, int line, std::string& out) {
  auto newline = [&](int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * depth, ' ');
  };
  const char* item_separator = indent < 0 ? ", " : ",";
  switch (value.kind()) {
    case Kind::undefined:
    case Kind::name_space:
      template_error(
          line, concat("tojson: Object of type ", type_name(value), " is not JSON serializable"));
    case Kind::none:
      out += "null";
      return;
    case Kind::boolean:
      out += value.as_boolean() ? "true" : "false";
      return;
    case Kind::integer:
      out += std::to_string(value.as_integer());
      return;
    case Kind::floating: {
      double number = value.as_floating();
      out += std::isnan(number)   ? "NaN"
             : std::isinf(number) ? (number < 0 ? "-Infinity" : "Infinity")
                                  : python_float(number);
      return;
    }
    case Kind::string: {
      out += '"';
      for (char c : value.as_string()) {
        unsigned char byte = static_cast<unsigned char>(c);
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          default:
            if (byte < 0x20) {
              char escape[8];
              std::snprintf(escape, sizeof(escape), "\\u%04x", byte);
              out += escape;
            } else {
              out += c;
            }
        }
      }
      out += '"';
      return;
    }
    case Kind::list: {
      const List& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t index = 0; index < items.size(); ++index) {
        if (index) out += item_separator;
        newline(level + 1);
        append_json(items[index], indent, level + 1, line, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case Kind::dict: {
      const Dict& members = value.as_dict();
      if (members.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t index = 0; index < members.size(); ++index) {
        if (index) out += item_separator;
        newline(level + 1);
        append_json(TemplateValue::string(members[index].first), indent, level + 1, line, out);
        out += ": ";
        append_json(members[index].second, indent, level + 1, line, out);
      }
      newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace jinja

namespace {

using jinja::Dict;
using jinja::List;

TemplateValue value_from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return TemplateValue::none();
    case nlohmann::ordered_json::value_t::boolean:
      return TemplateValue::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return TemplateValue::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t number = json.get<uint64_t>();
      if (number > static_cast<uint64_t>(INT64_MAX))
        fail("JSON: integer ", number, " is too large");
      return TemplateValue::integer(static_cast<int64_t>(number));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return TemplateValue::floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return TemplateValue::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : json) items.push_back(value_from_json(item));
      return TemplateValue::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict members;
      for (const auto& [key, item] : json.items()) members.emplace_back(key, value_from_json(item));
      return TemplateValue::dict(std::move(members));
    }
    default:
      fail("JSON: unsupported value");
  }
}

}  // namespace

TemplateValue TemplateValue::undefined(std::string description) {
  TemplateValue value;
  value.string_ = std::move(description);
  return value;
}

TemplateValue TemplateValue::none() {
  TemplateValue value;
  value.kind_ = Kind::none;
  return value;
}

TemplateValue TemplateValue::boolean(bool boolean) {
  TemplateValue value;
  value.kind_ = Kind::boolean;
  value.boolean_ = boolean;
  return value;
}

TemplateValue TemplateValue::integer(int64_t integer) {
  TemplateValue value;
  value.kind_ = Kind::integer;
  value.integer_ = integer;
  return value;
}

TemplateValue TemplateValue::floating(double floating) {
  TemplateValue value;
  value.kind_ = Kind::floating;
  value.floating_ = floating;
  return value;
}

TemplateValue TemplateValue::string(std::string text) {
  TemplateValue value;
  value.kind_ = Kind::string;
  value.string_ = std::move(text);
  return value;
}

TemplateValue TemplateValue::list(List items) {
  TemplateValue value;
  value.kind_ = Kind::list;
  value.list_ = std::make_shared<const List>(std::move(items));
  return value;
}

TemplateValue TemplateValue::dict(Dict members) {
  TemplateValue value;
  value.kind_ = Kind::dict;
  value.dict_ = std::make_shared<Dict>(std::move(members));
  return value;
}

TemplateValue TemplateValue::name_space(Dict attributes) {
  TemplateValue value = dict(std::move(attributes));
  value.kind_ = Kind::name_space;
  return value;
}

TemplateValue TemplateValue::from_json(std::string_view json, std::string_view what) {
  nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(json.begin(), json.end(), nullptr, false);
  if (parsed.is_discarded()) fail(what, ": not valid JSON");
  return value_from_json(parsed);
}

const TemplateValue* TemplateValue::find(std::string_view key) const {
  if (!dict_) return nullptr;
  for (const auto& [name, value] : *dict_)
    if (name == key) return &value;
  return nullptr;
}

void TemplateValue::set_attribute(const std::string& name, TemplateValue value) const {
  for (auto& [key, existing] : *dict_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  dict_->emplace_back(name, std::move(value));
}

}  // namespace fornace::text
