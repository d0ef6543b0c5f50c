// Tokenizer metadata of GGUF files, both ways.
#include "text/gguf_metadata.h"

#include <filesystem>

#include "core/error.h"

namespace fornace {

text::GgufVocabulary read_gguf_vocabulary(const GgufFile& file) {
  namespace key = text::gguf_key;
  text::GgufVocabulary vocabulary;
  auto optional_id = [&](const char* name, std::optional<uint32_t>& id) {
    if (!file.has(name)) return;
    uint64_t value = file.get_u64(name);
    if (value > UINT32_MAX) fail(file.path(), ": ", name, " ", value, " is past 32 bits");
    id = static_cast<uint32_t>(value);
  };
  auto optional_bool = [&](const char* name, std::optional<bool>& flag) {
    if (file.has(name)) flag = file.get_bool(name);
  };
  vocabulary.model = file.get_string(key::model);
  if (file.has(key::pre)) vocabulary.pre = file.get_string(key::pre);
  vocabulary.tokens = file.get_string_array(key::tokens);
  if (file.has(key::token_type)) vocabulary.token_types = file.get_i32_array(key::token_type);
  if (file.has(key::merges)) vocabulary.merges = file.get_string_array(key::merges);
  if (file.has(key::scores)) vocabulary.scores = file.get_f32_array(key::scores);
  optional_id(key::bos_token_id, vocabulary.bos_token_id);
  optional_id(key::eos_token_id, vocabulary.eos_token_id);
  optional_id(key::unknown_token_id, vocabulary.unknown_token_id);
  optional_id(key::padding_token_id, vocabulary.padding_token_id);
  optional_bool(key::add_bos_token, vocabulary.add_bos_token);
  optional_bool(key::add_eos_token, vocabulary.add_eos_token);
  optional_bool(key::add_space_prefix, vocabulary.add_space_prefix);
  if (file.has(key::chat_template)) vocabulary.chat_template = file.get_string(key::chat_template);
  return vocabulary;
}

std::vector<GgufKeyValue> gguf_vocabulary_metadata(const text::GgufVocabulary& vocabulary) {
  namespace key = text::gguf_key;
  std::vector<GgufKeyValue> metadata;
  auto add = [&](const char* name, GgufValue value) { metadata.push_back({name, std::move(value)}); };
  add(key::model, GgufValue(vocabulary.model));
  if (!vocabulary.pre.empty()) add(key::pre, GgufValue(vocabulary.pre));
  add(key::tokens, GgufValue(vocabulary.tokens));
  if (!vocabulary.token_types.empty()) add(key::token_type, GgufValue(vocabulary.token_types));
  if (!vocabulary.merges.empty()) add(key::merges, GgufValue(vocabulary.merges));
  if (!vocabulary.scores.empty()) add(key::scores, GgufValue(vocabulary.scores));
  for (auto [name, id] : {std::pair{key::bos_token_id, vocabulary.bos_token_id},
                          {key::eos_token_id, vocabulary.eos_token_id},
                          {key::unknown_token_id, vocabulary.unknown_token_id},
                          {key::padding_token_id, vocabulary.padding_token_id}}) {
    if (id) add(name, GgufValue(*id));
  }
  for (auto [name, flag] : {std::pair{key::add_bos_token, vocabulary.add_bos_token},
                            {key::add_eos_token, vocabulary.add_eos_token},
                            {key::add_space_prefix, vocabulary.add_space_prefix}}) {
    if (flag) add(name, GgufValue(*flag));
  }
  if (vocabulary.chat_template) add(key::chat_template, GgufValue(*vocabulary.chat_template));
  return metadata;
}

std::vector<GgufKeyValue> gguf_tokenizer_metadata(const ModelFiles& files, int64_t vocab_size) {
  if (!files.is_gguf()) {
    return gguf_vocabulary_metadata(
        text::load_gguf_vocabulary(files.path(), static_cast<size_t>(vocab_size)));
  }
  std::vector<GgufKeyValue> metadata;
  for (const GgufKeyValue& entry : files.gguf()->metadata()) {
    if (entry.key.rfind("tokenizer.", 0) == 0) metadata.push_back(entry);
  }
  return metadata;
}

}  // namespace fornace
