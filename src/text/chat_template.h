// A Jinja2-subset interpreter for Hugging Face chat templates (tokenizer_config.json
// chat_template), rendering as transformers does: trim_blocks, lstrip_blocks, tojson,
// raise_exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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
  // JSON text as values: objects become dicts, arrays lists, null None. Throws Error on bad JSON.
  static TemplateValue from_json(std::string_view json);

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

// A parsed template. Parsing throws Error for syntax errors and for anything outside the subset
// (naming it, its line and --prompt as the way around); render() throws Error for run-time
// errors (undefined values used, raise_exception(), limits).
class ChatTemplate {
 public:
  explicit ChatTemplate(std::string_view source);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // Renders with `variables` as the template's globals (messages, add_generation_prompt, ...).
  std::string render(const TemplateValue::Dict& variables,
                     const ChatTemplateLimits& limits = ChatTemplateLimits()) const;

  struct Program;

 private:
  std::unique_ptr<Program> program_;
};

// What tokenizer_config.json says for chat: the template and the special tokens it may print.
struct ChatTemplateConfig {
  std::optional<std::string> chat_template, bos_token, eos_token;
};

class JsonScanner;

// A special token of tokenizer_config.json, the next value of `scanner`: a string,
// {"content": ...} or null.
std::optional<std::string> read_token_name(JsonScanner& scanner, const std::string& field);

// Reads tokenizer_config.json text: chat_template (a string, or a list of {name, template} whose
// "default" is taken), bos_token and eos_token (strings, {"content": ...} or null).
ChatTemplateConfig read_chat_template_config(std::string_view json, const std::string& source_name);

// The globals transformers renders a chat template with: messages, add_generation_prompt, tools
// and documents as None, and bos_token / eos_token when they are set.
TemplateValue::Dict chat_template_variables(const ChatTemplateConfig& config,
                                            TemplateValue messages, bool add_generation_prompt);

}  // namespace fornace::text
