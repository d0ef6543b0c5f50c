// Reads tokenizer_config.json with the JSON scanner, which skips the rest without building it.
#include "text/tokenizer_config.h"

#include "text/json_scanner.h"

namespace fornace::text {
namespace {

// A special token: a string, {"content": ...} or null.
std::optional<std::string> read_token(JsonScanner& scanner, const std::string& field) {
  if (scanner.null()) return std::nullopt;
  if (scanner.peek() != '{') return std::string(scanner.string(field));
  std::optional<std::string> content;
  scanner.for_each_member(field, [&](std::string_view key) {
    if (key == "content" && !scanner.null()) {
      content = std::string(scanner.string(field + ".content"));
    } else {
      scanner.skip_value(field);
    }
  });
  return content;
}

// The template: a string, or a list of {"name", "template"} of which "default" is the chat one.
std::optional<std::string> read_chat_template(JsonScanner& scanner) {
  const std::string field = "chat_template";
  if (scanner.null()) return std::nullopt;
  if (scanner.peek() != '[') return std::string(scanner.string(field));
  std::optional<std::string> chosen;
  scanner.for_each_element(field, [&](size_t) {
    std::string name, source;
    scanner.for_each_member(field, [&](std::string_view key) {
      std::string member(key);
      if (member == "name" || member == "template") {
        (member == "name" ? name : source) = std::string(scanner.string(field + "." + member));
      } else {
        scanner.skip_value(field);
      }
    });
    if (name == "default") chosen = source;
  });
  return chosen;
}

}  // namespace

TokenizerConfig read_tokenizer_config(std::string_view json, const std::string& source_name) {
  TokenizerConfig config;
  if (json.empty()) return config;
  JsonScanner scanner(json, source_name);
  scanner.for_each_member("", [&](std::string_view key) {
    std::string name(key);  // A copy: the key may live in the scanner's scratch buffer.
    if (name == "chat_template") {
      config.chat_template = read_chat_template(scanner);
    } else if (name == "bos_token") {
      config.bos_token = read_token(scanner, name);
    } else if (name == "eos_token") {
      config.eos_token = read_token(scanner, name);
    } else if (name == "unk_token") {
      config.unk_token = read_token(scanner, name);
    } else if (name == "pad_token") {
      config.pad_token = read_token(scanner, name);
    } else if ((name == "add_bos_token" || name == "add_eos_token") && !scanner.null()) {
      (name == "add_bos_token" ? config.add_bos_token : config.add_eos_token) =
          scanner.boolean(name);
    } else {
      scanner.skip_value(name);
    }
  });
  scanner.expect_end();
  return config;
}

}  // namespace fornace::text
