// tokenizer_config.json, read once for every user: the chat template and the special tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fornace::text {

// What tokenizer_config.json says; a field the file lacks (or sets to null) is unset.
struct TokenizerConfig {
  // A string, or from a list of {name, template} the one named "default".
  std::optional<std::string> chat_template;
  // Special tokens, written as strings or {"content": ...}.
  std::optional<std::string> bos_token, eos_token, unk_token, pad_token;
  std::optional<bool> add_bos_token, add_eos_token;
};

// Reads tokenizer_config.json text (empty text: an empty config); other fields are skipped
// without being built. Errors name `source_name` and the field.
TokenizerConfig read_tokenizer_config(std::string_view json, const std::string& source_name);

}  // namespace fornace::text
