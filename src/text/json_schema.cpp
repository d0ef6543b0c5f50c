// The JSON schema compiler: JSON's lexical rules as grammar rules, and one rule per schema.
#include "text/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/error.h"

namespace fornace::text {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 128;
constexpr int kMaxIndent = 16;
constexpr int kMaxIntegerDigits = 16;
constexpr int kMaxFractionDigits = 15;
constexpr int kMaxExponentDigits = 2;

bool is_annotation(const std::string& keyword) {
  static const char* const names[] = {"title",   "description", "default", "examples",
                                      "$schema", "$id",         "$comment"};
  for (const char* name : names) {
    if (keyword == name) return true;
  }
  return false;
}

bool is_supported(const std::string& keyword) {
  static const char* const names[] = {
      "type",       "properties", "required", "additionalProperties",
      "items",      "minItems",   "maxItems", "enum",
      "const",      "anyOf",      "$ref",     "$defs",
      "definitions"};
  for (const char* name : names) {
    if (keyword == name) return true;
  }
  return false;
}

// What a JSON value is, in the schema's type names.
std::string value_type(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "boolean";
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  if (value.is_string()) return "string";
  if (value.is_array()) return "array";
  return "object";
}

// How deeply `value` nests (1 for a scalar), counted without recursion and capped past `limit`.
int nesting_depth(const Json& value, int limit) {
  std::vector<std::pair<const Json*, int>> pending = {{&value, 1}};
  int deepest = 0;
  while (!pending.empty()) {
    auto [at, depth] = pending.back();
    pending.pop_back();
    deepest = std::max(deepest, depth);
    if (deepest > limit) return deepest;
    if (at->is_structured()) {
      for (const Json& inner : *at) pending.emplace_back(&inner, depth + 1);
    }
  }
  return deepest;
}

// A JSON pointer segment: "~" as "~0" and "/" as "~1".
std::string escape_segment(const std::string& segment) {
  std::string escaped;
  for (char each : segment) {
    if (each == '~') {
      escaped += "~0";
    } else if (each == '/') {
      escaped += "~1";
    } else {
      escaped += each;
    }
  }
  return escaped;
}

ByteSet byte_range(uint8_t first, uint8_t last) {
  ByteSet bytes;
  for (int each = first; each <= last; ++each) bytes.set(static_cast<size_t>(each));
  return bytes;
}

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar& grammar, const Json& root) : grammar_(grammar), root_(root) {}

  // The rule of `schema`, found at `pointer` (a JSON pointer into the root).
  int32_t compile(const Json& schema, const std::string& pointer, int depth);
  // The rule of the schema at `pointer`, compiled once (references and recursion meet here).
  int32_t compile_at(const std::string& pointer, const Json& schema, int depth);
  // A rule for any JSON object.
  int32_t any_object() {
    lexical_rules();
    return object_any_;
  }

 private:
  [[noreturn]] void fail_at(const std::string& pointer, const std::string& what) const {
    fail(what, " (at #", pointer, ")");
  }
  GrammarElement ws() const { return Grammar::rule(ws_); }
  int32_t rule_of(std::initializer_list<GrammarSequence> alternatives) {
    const int32_t rule = grammar_.add_rule();
    for (const GrammarSequence& sequence : alternatives) grammar_.add_alternative(rule, sequence);
    return rule;
  }
  int32_t literal(const std::string& text) {
    GrammarSequence sequence;
    grammar_.append_text(sequence, text);
    return rule_of({sequence});
  }
  // Zero to `count` of `element`.
  int32_t up_to(GrammarElement element, int count) {
    int32_t rule = rule_of({{}});
    for (int each = 0; each < count; ++each) rule = rule_of({{}, {element, Grammar::rule(rule)}});
    return rule;
  }
  void lexical_rules();
  const Json* resolve(const std::string& pointer) const;
  int32_t compile_reference(const Json& schema, const std::string& pointer, int depth);
  int32_t compile_enum(const Json& schema, const std::string& pointer);
  int32_t compile_type(const std::string& type, const Json& schema, const std::string& pointer,
                       int depth);
  int32_t compile_object(const Json& schema, const std::string& pointer, int depth);
  int32_t compile_array(const Json& schema, const std::string& pointer, int depth);
  int64_t array_bound(const Json& schema, const char* keyword, const std::string& pointer) const;

  Grammar& grammar_;
  const Json& root_;
  std::map<std::string, int32_t> compiled_;  // By pointer.
  bool lexical_ready_ = false;
  int32_t ws_ = -1, string_ = -1, integer_ = -1, number_ = -1, boolean_ = -1, null_ = -1;
  int32_t value_ = -1, object_any_ = -1, array_any_ = -1;
};

void SchemaCompiler::lexical_rules() {
  if (lexical_ready_) return;
  lexical_ready_ = true;
  Grammar& g = grammar_;
  ws_ = rule_of({{}, {g.byte(' ')}, {g.byte('\n'), Grammar::rule(up_to(g.byte(' '), kMaxIndent))}});
  // A string's characters: printable ASCII but '"' and '\\', well-formed UTF-8 sequences, and
  // escapes (\u escapes of UTF-16 surrogates left out: some parsers refuse them unpaired).
  ByteSet plain = byte_range(0x20, 0x7f);
  plain.reset('"');
  plain.reset('\\');
  const GrammarElement tail = g.byte_set(byte_range(0x80, 0xbf));
  ByteSet three_byte_leads = byte_range(0xe1, 0xec) | byte_range(0xee, 0xef);
  const GrammarElement hex =
      g.byte_set(byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F'));
  ByteSet hex_not_d = byte_range('0', '9') | byte_range('a', 'c') | byte_range('e', 'f') |
                      byte_range('A', 'C') | byte_range('E', 'F');
  ByteSet d_letter;
  d_letter.set('d');
  d_letter.set('D');
  ByteSet escaped;
  for (char each : std::string("\"\\/bfnrt")) escaped.set(static_cast<uint8_t>(each));
  const int32_t character = rule_of({
      {g.byte_set(plain)},
      {g.byte_set(byte_range(0xc2, 0xdf)), tail},
      {g.byte(0xe0), g.byte_set(byte_range(0xa0, 0xbf)), tail},
      {g.byte_set(three_byte_leads), tail, tail},
      {g.byte(0xed), g.byte_set(byte_range(0x80, 0x9f)), tail},
      {g.byte(0xf0), g.byte_set(byte_range(0x90, 0xbf)), tail, tail},
      {g.byte_set(byte_range(0xf1, 0xf3)), tail, tail, tail},
      {g.byte(0xf4), g.byte_set(byte_range(0x80, 0x8f)), tail, tail},
      {g.byte('\\'), g.byte_set(escaped)},
      {g.byte('\\'), g.byte('u'), g.byte_set(hex_not_d), hex, hex, hex},
      {g.byte('\\'), g.byte('u'), g.byte_set(d_letter), g.byte_set(byte_range('0', '7')), hex, hex},
  });
  const int32_t characters = g.add_rule();
  g.add_alternative(characters, {});
  g.add_alternative(characters, {Grammar::rule(character), Grammar::rule(characters)});
  string_ = rule_of({{g.byte('"'), Grammar::rule(characters), g.byte('"')}});

  const GrammarElement digit = g.byte_set(byte_range('0', '9'));
  const int32_t sign = rule_of({{}, {g.byte('-')}});
  const int32_t natural = rule_of(
      {{g.byte('0')},
       {g.byte_set(byte_range('1', '9')), Grammar::rule(up_to(digit, kMaxIntegerDigits - 1))}});
  integer_ = rule_of({{Grammar::rule(sign), Grammar::rule(natural)}});
  const int32_t fraction =
      rule_of({{}, {g.byte('.'), digit, Grammar::rule(up_to(digit, kMaxFractionDigits - 1))}});
  ByteSet exponent_mark;
  exponent_mark.set('e');
  exponent_mark.set('E');
  const int32_t exponent_sign = rule_of({{}, {g.byte('+')}, {g.byte('-')}});
  const int32_t exponent = rule_of({{},
                                    {g.byte_set(exponent_mark), Grammar::rule(exponent_sign), digit,
                                     Grammar::rule(up_to(digit, kMaxExponentDigits - 1))}});
  number_ = rule_of({{Grammar::rule(integer_), Grammar::rule(fraction), Grammar::rule(exponent)}});
  boolean_ = g.add_rule();
  for (const char* word : {"true", "false"}) {
    GrammarSequence sequence;
    g.append_text(sequence, word);
    g.add_alternative(boolean_, sequence);
  }
  null_ = literal("null");

  // Any value: objects and arrays name it back.
  value_ = g.add_rule();
  const int32_t member =
      rule_of({{Grammar::rule(string_), ws(), g.byte(':'), ws(), Grammar::rule(value_), ws()}});
  const int32_t more_members = g.add_rule();
  g.add_alternative(more_members, {});
  g.add_alternative(more_members,
                    {g.byte(','), ws(), Grammar::rule(member), Grammar::rule(more_members)});
  const int32_t members = rule_of({{}, {Grammar::rule(member), Grammar::rule(more_members)}});
  object_any_ = rule_of({{g.byte('{'), ws(), Grammar::rule(members), g.byte('}')}});
  const int32_t more_items = g.add_rule();
  g.add_alternative(more_items, {});
  g.add_alternative(more_items,
                    {g.byte(','), ws(), Grammar::rule(value_), ws(), Grammar::rule(more_items)});
  const int32_t items = rule_of({{}, {Grammar::rule(value_), ws(), Grammar::rule(more_items)}});
  array_any_ = rule_of({{g.byte('['), ws(), Grammar::rule(items), g.byte(']')}});
  for (int32_t kind : {object_any_, array_any_, string_, number_, boolean_, null_}) {
    g.add_alternative(value_, {Grammar::rule(kind)});
  }
}

const Json* SchemaCompiler::resolve(const std::string& pointer) const {
  const Json* at = &root_;
  size_t begin = 0;
  while (begin < pointer.size()) {
    if (pointer[begin] != '/') return nullptr;
    size_t end = pointer.find('/', begin + 1);
    if (end == std::string::npos) end = pointer.size();
    std::string segment;
    for (size_t index = begin + 1; index < end; ++index) {
      if (pointer[index] == '~' && index + 1 < end && pointer[index + 1] == '0') {
        segment += '~';
        ++index;
      } else if (pointer[index] == '~' && index + 1 < end && pointer[index + 1] == '1') {
        segment += '/';
        ++index;
      } else if (pointer[index] == '~') {
        return nullptr;
      } else {
        segment += pointer[index];
      }
    }
    if (at->is_object()) {
      auto found = at->find(segment);
      if (found == at->end()) return nullptr;
      at = &*found;
    } else if (at->is_array()) {
      if (segment.empty() || segment.size() > 9 ||
          segment.find_first_not_of("0123456789") != std::string::npos) {
        return nullptr;
      }
      const size_t index = std::stoul(segment);
      if (index >= at->size()) return nullptr;
      at = &(*at)[index];
    } else {
      return nullptr;
    }
    begin = end;
  }
  return at;
}

int32_t SchemaCompiler::compile_at(const std::string& pointer, const Json& schema, int depth) {
  if (auto found = compiled_.find(pointer); found != compiled_.end()) return found->second;
  const int32_t rule = grammar_.add_rule();
  compiled_[pointer] = rule;
  grammar_.add_alternative(rule, {Grammar::rule(compile(schema, pointer, depth))});
  return rule;
}

int32_t SchemaCompiler::compile(const Json& schema, const std::string& pointer, int depth) {
  if (depth > kMaxDepth) fail_at(pointer, concat("schemas nest deeper than ", kMaxDepth));
  lexical_rules();
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return value_;
    fail_at(pointer, "the schema false matches nothing");
  }
  if (!schema.is_object()) {
    fail_at(pointer, "expected a schema (an object), but got " + value_type(schema));
  }
  for (const auto& [keyword, value] : schema.items()) {
    if (!is_supported(keyword) && !is_annotation(keyword)) {
      fail_at(pointer, "'" + keyword + "' is not supported");
    }
  }
  // Definitions are compiled whether named or not, so that a bad one is found.
  for (const char* keyword : {"$defs", "definitions"}) {
    auto found = schema.find(keyword);
    if (found == schema.end()) continue;
    if (!found->is_object()) {
      fail_at(pointer, std::string("'") + keyword + "' must be an object");
    }
    for (const auto& [name, definition] : found->items()) {
      compile_at(pointer + "/" + keyword + "/" + escape_segment(name), definition, depth + 1);
    }
  }
  // Keywords that do not combine with the others.
  for (const char* alone : {"$ref", "anyOf"}) {
    if (!schema.contains(alone)) continue;
    for (const auto& [keyword, value] : schema.items()) {
      if (keyword != alone && is_supported(keyword) && keyword != "$defs" &&
          keyword != "definitions") {
        fail_at(pointer, std::string("'") + alone + "' beside '" + keyword + "' is not supported");
      }
    }
  }
  if (schema.contains("$ref")) return compile_reference(schema, pointer, depth);
  if (auto any_of = schema.find("anyOf"); any_of != schema.end()) {
    if (!any_of->is_array() || any_of->empty()) {
      fail_at(pointer, "'anyOf' must be a non-empty array of schemas");
    }
    const int32_t rule = grammar_.add_rule();
    for (size_t index = 0; index < any_of->size(); ++index) {
      const int32_t choice =
          compile((*any_of)[index], pointer + "/anyOf/" + std::to_string(index), depth + 1);
      grammar_.add_alternative(rule, {Grammar::rule(choice)});
    }
    return rule;
  }
  if (schema.contains("enum") || schema.contains("const")) return compile_enum(schema, pointer);

  std::vector<std::string> types;
  if (auto type = schema.find("type"); type != schema.end()) {
    if (type->is_string()) {
      types.push_back(type->get<std::string>());
    } else if (type->is_array() && !type->empty()) {
      for (const Json& name : *type) {
        if (!name.is_string()) fail_at(pointer, "'type' must be a name or a list of names");
        types.push_back(name.get<std::string>());
      }
    } else {
      fail_at(pointer, "'type' must be a name or a non-empty list of names");
    }
  } else {
    const bool object_keywords = schema.contains("properties") || schema.contains("required") ||
                                 schema.contains("additionalProperties");
    const bool array_keywords =
        schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems");
    if (!object_keywords && !array_keywords) return value_;
    types = {"object", "array", "string", "number", "boolean", "null"};
  }
  const int32_t rule = grammar_.add_rule();
  for (const std::string& type : types) {
    grammar_.add_alternative(rule, {Grammar::rule(compile_type(type, schema, pointer, depth))});
  }
  return rule;
}

int32_t SchemaCompiler::compile_reference(const Json& schema, const std::string& pointer,
                                          int depth) {
  const Json& reference = schema["$ref"];
  if (!reference.is_string()) fail_at(pointer, "'$ref' must be a string");
  const std::string target = reference.get<std::string>();
  const Json* resolved = target.starts_with("#") ? resolve(target.substr(1)) : nullptr;
  if (!resolved) {
    fail_at(pointer, "'$ref' '" + target +
                         "' does not resolve (references must be JSON pointers into this "
                         "schema, such as '#/$defs/name')");
  }
  return compile_at(target.substr(1), *resolved, depth + 1);
}

int32_t SchemaCompiler::compile_enum(const Json& schema, const std::string& pointer) {
  for (const char* keyword : {"enum", "const"}) {
    // The values are compared and written by recursive code: their depth is checked first.
    auto found = schema.find(keyword);
    if (found != schema.end() && nesting_depth(*found, kMaxDepth) > kMaxDepth) {
      fail_at(pointer, concat("'", keyword, "' values nest deeper than ", kMaxDepth));
    }
  }
  std::vector<Json> values;
  if (auto found = schema.find("enum"); found != schema.end()) {
    if (!found->is_array() || found->empty()) fail_at(pointer, "'enum' must be a non-empty array");
    values.assign(found->begin(), found->end());
  }
  if (auto found = schema.find("const"); found != schema.end()) {
    if (schema.contains("enum")) {
      std::erase_if(values, [&](const Json& value) { return value != *found; });
    } else {
      values.push_back(*found);
    }
  }
  if (auto type = schema.find("type"); type != schema.end()) {
    std::vector<std::string> names;
    if (type->is_string()) names.push_back(type->get<std::string>());
    if (type->is_array()) {
      for (const Json& name : *type) {
        if (name.is_string()) names.push_back(name.get<std::string>());
      }
    }
    if (names.empty()) fail_at(pointer, "'type' must be a name or a non-empty list of names");
    std::erase_if(values, [&](const Json& value) {
      const std::string kind = value_type(value);
      for (const std::string& name : names) {
        if (name == kind || (name == "number" && kind == "integer") ||
            (name == "integer" && kind == "number" &&
             std::floor(value.get<double>()) == value.get<double>())) {
          return false;
        }
      }
      return true;
    });
  }
  if (values.empty()) fail_at(pointer, "no value of 'enum' or 'const' fits the schema");

  const int32_t rule = grammar_.add_rule();
  for (const Json& value : values) {
    std::string text;
    try {
      text = value.dump();
    } catch (const nlohmann::json::exception& error) {
      fail_at(pointer,
              std::string("a value of 'enum' or 'const' cannot be written: ") + error.what());
    }
    if (text.find("null") != std::string::npos) {
      // Non-finite numbers are written as null: refuse them rather than change the value.
      std::function<bool(const Json&)> finite = [&](const Json& each) {
        if (each.is_number_float()) return std::isfinite(each.get<double>());
        if (each.is_structured()) {
          for (const Json& inner : each) {
            if (!finite(inner)) return false;
          }
        }
        return true;
      };
      if (!finite(value)) fail_at(pointer, "'enum' and 'const' numbers must be finite");
    }
    GrammarSequence sequence;
    grammar_.append_text(sequence, text);
    grammar_.add_alternative(rule, sequence);
  }
  return rule;
}

int32_t SchemaCompiler::compile_type(const std::string& type, const Json& schema,
                                     const std::string& pointer, int depth) {
  if (type == "object") return compile_object(schema, pointer, depth);
  if (type == "array") return compile_array(schema, pointer, depth);
  if (type == "string") return string_;
  if (type == "number") return number_;
  if (type == "integer") return integer_;
  if (type == "boolean") return boolean_;
  if (type == "null") return null_;
  fail_at(pointer, "'type' '" + type +
                       "' is not one of object, array, string, number, integer, boolean, null");
}

int32_t SchemaCompiler::compile_object(const Json& schema, const std::string& pointer, int depth) {
  const Json empty = Json::object();
  const Json* properties = &empty;
  if (auto found = schema.find("properties"); found != schema.end()) {
    if (!found->is_object()) fail_at(pointer, "'properties' must be an object");
    properties = &*found;
  }
  bool closed = false;  // additionalProperties is false or a schema.
  if (auto found = schema.find("additionalProperties"); found != schema.end()) {
    if (found->is_object()) {
      compile(*found, pointer + "/additionalProperties", depth + 1);
      closed = true;
    } else if (found->is_boolean()) {
      closed = !found->get<bool>();
    } else {
      fail_at(pointer, "'additionalProperties' must be a boolean or a schema");
    }
  }
  std::vector<std::string> required;
  if (auto found = schema.find("required"); found != schema.end()) {
    if (!found->is_array()) fail_at(pointer, "'required' must be an array of property names");
    for (const Json& name : *found) {
      if (!name.is_string()) fail_at(pointer, "'required' must be an array of property names");
      if (!properties->contains(name.get<std::string>())) {
        fail_at(pointer, "required property '" + name.get<std::string>() +
                             "' is not in 'properties' (additional properties are not generated)");
      }
      required.push_back(name.get<std::string>());
    }
  }
  if (!schema.contains("properties") && !closed) return object_any_;

  Grammar& g = grammar_;
  // tails[i][e]: properties i.. of the declared order, e saying whether one came before (and so
  // a comma goes first). The last ones are built first.
  const size_t count = properties->size();
  std::vector<std::array<int32_t, 2>> tails(count + 1);
  tails[count] = {rule_of({{}}), rule_of({{}})};
  std::vector<std::pair<std::string, const Json*>> ordered;
  for (const auto& [name, property] : properties->items()) ordered.emplace_back(name, &property);
  for (size_t index = count; index-- > 0;) {
    const auto& [name, property] = ordered[index];
    const int32_t value =
        compile(*property, pointer + "/properties/" + escape_segment(name), depth + 1);
    const bool must = std::find(required.begin(), required.end(), name) != required.end();
    for (int after_one = 0; after_one < 2; ++after_one) {
      GrammarSequence sequence;
      if (after_one) sequence = {g.byte(','), ws()};
      g.append_text(sequence, Json(name).dump());
      for (GrammarElement element : {ws(), g.byte(':'), ws(), Grammar::rule(value), ws(),
                                     Grammar::rule(tails[index + 1][1])}) {
        sequence.push_back(element);
      }
      tails[index][after_one] =
          must ? rule_of({sequence})
               : rule_of({sequence, {Grammar::rule(tails[index + 1][after_one])}});
    }
  }
  return rule_of({{g.byte('{'), ws(), Grammar::rule(tails[0][0]), g.byte('}')}});
}

int64_t SchemaCompiler::array_bound(const Json& schema, const char* keyword,
                                    const std::string& pointer) const {
  auto found = schema.find(keyword);
  if (found == schema.end()) return -1;
  if (!found->is_number_integer() ||
      (found->is_number_integer() && found->get<int64_t>() < 0 && !found->is_number_unsigned())) {
    fail_at(pointer, std::string("'") + keyword + "' must be a non-negative integer");
  }
  if (found->is_number_unsigned() ? found->get<uint64_t>() > kMaxArrayBound
                                  : found->get<int64_t>() > kMaxArrayBound) {
    fail_at(pointer, concat("'", keyword, "' above ", kMaxArrayBound, " is not supported"));
  }
  return found->get<int64_t>();
}

int32_t SchemaCompiler::compile_array(const Json& schema, const std::string& pointer, int depth) {
  int32_t item = value_;
  bool no_items = false;
  if (auto found = schema.find("items"); found != schema.end()) {
    if (found->is_boolean() && !found->get<bool>()) {
      no_items = true;
    } else {
      item = compile(*found, pointer + "/items", depth + 1);
    }
  }
  const int64_t min_items = std::max<int64_t>(array_bound(schema, "minItems", pointer), 0);
  int64_t max_items = array_bound(schema, "maxItems", pointer);  // -1: no bound.
  if (no_items) max_items = 0;
  if (max_items >= 0 && min_items > max_items) {
    fail_at(pointer, no_items ? "'minItems' asks for items that 'items' false forbids"
                              : "'minItems' is greater than 'maxItems'");
  }
  Grammar& g = grammar_;
  // rest(k): what may follow the k-th item. Built from the largest k down.
  const int64_t top = max_items >= 0 ? max_items : min_items;
  int32_t rest = -1;
  if (max_items < 0) {
    rest = g.add_rule();
    g.add_alternative(rest, {});
    g.add_alternative(rest, {g.byte(','), ws(), Grammar::rule(item), ws(), Grammar::rule(rest)});
  } else {
    rest = rule_of({{}});
  }
  for (int64_t k = top - 1; k >= 1; --k) {
    GrammarSequence more = {g.byte(','), ws(), Grammar::rule(item), ws(), Grammar::rule(rest)};
    rest = k >= min_items ? rule_of({{}, more}) : rule_of({more});
  }
  GrammarSequence some = {Grammar::rule(item), ws(), Grammar::rule(rest)};
  const int32_t items =
      max_items == 0 ? rule_of({{}}) : (min_items == 0 ? rule_of({{}, some}) : rule_of({some}));
  return rule_of({{g.byte('['), ws(), Grammar::rule(items), g.byte(']')}});
}

}  // namespace

namespace {

// Finishes `grammar` at `start`, saying in the schema's terms why it cannot be.
void finish_schema_grammar(Grammar& grammar, int32_t start) {
  try {
    grammar.finish(start);
  } catch (const Error& error) {
    std::string what = error.what();
    if (what.find("finite sentence") != std::string::npos) {
      fail(
          "the schema has no JSON instance of bounded size (a required property or item "
          "recurses without end) (at #)");
    }
    fail("the schema's references loop without a value between them (at #)");
  }
}

}  // namespace

Grammar compile_json_schema(const nlohmann::ordered_json& schema) {
  Grammar grammar;
  SchemaCompiler compiler(grammar, schema);
  finish_schema_grammar(grammar, compiler.compile_at("", schema, 0));
  return grammar;
}

Grammar compile_framed_schemas(const std::vector<FramedSchema>& alternatives) {
  Grammar grammar;
  const int32_t start = grammar.add_rule();
  for (const FramedSchema& alternative : alternatives) {
    SchemaCompiler compiler(grammar, alternative.schema);
    const int32_t value = compiler.compile_at("", alternative.schema, 0);
    GrammarSequence sequence;
    grammar.append_text(sequence, alternative.before);
    sequence.push_back(Grammar::rule(value));
    grammar.append_text(sequence, alternative.after);
    grammar.add_alternative(start, sequence);
  }
  finish_schema_grammar(grammar, start);
  return grammar;
}

Grammar json_object_grammar() {
  Grammar grammar;
  const Json unused = Json::object();
  SchemaCompiler compiler(grammar, unused);
  grammar.finish(compiler.any_object());
  return grammar;
}

}  // namespace fornace::text
