// Reads tokenizer.json and tokenizer_config.json into the tokenizer's state. The large parts
// (vocab, merges) go through JsonScanner in place; the small objects through nlohmann::json.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/json_scanner.h"
#include "text/tokenizer_state.h"
#include "text/utf8.h"

namespace fornace::text {
namespace {

using Json = nlohmann::json;

class TokenizerJsonReader {
 public:
  TokenizerJsonReader(std::string_view json, TokenizerState& state)
      : scanner_(json, state.source_name),
        state_(state),
        id_limit_(std::min<uint64_t>(std::max<uint64_t>(json.size(), 1 << 20), UINT32_MAX)) {}

  void read() {
    bool has_model = false, has_pre_tokenizer = false, has_decoder = false;
    scanner_.for_each_member("", [&](std::string_view key) {
      if (key == "added_tokens") {
        read_added_tokens(parse_small("added_tokens"));
      } else if (key == "normalizer") {
        read_normalizer(parse_small("normalizer"));
      } else if (key == "pre_tokenizer") {
        read_pre_tokenizer(parse_small("pre_tokenizer"));
        has_pre_tokenizer = true;
      } else if (key == "post_processor") {
        read_post_processor(parse_small("post_processor"), "post_processor");
      } else if (key == "decoder") {
        read_decoder(parse_small("decoder"));
        has_decoder = true;
      } else if (key == "truncation" || key == "padding") {
        std::string field(key);
        if (!scanner_.null())
          error(field, "must be null (truncation and padding are not supported)");
      } else if (key == "model") {
        read_model();
        has_model = true;
      } else {
        scanner_.skip_value(std::string(key));  // A copy: the key may live in the scratch buffer.
      }
    });
    scanner_.expect_end();
    if (!has_model) error("model", "missing");
    if (!has_pre_tokenizer) error("pre_tokenizer", "missing");
    if (!has_decoder) error("decoder", "missing");
    finish();
  }

 private:
  [[noreturn]] void error(const std::string& field, std::string_view what) const {
    fail(state_.source_name, ": ", field, ": ", what);
  }

  // Errors name the byte where nlohmann::json stopped (its `byte` counts from 1).
  Json parse_small(std::string_view field) {
    std::string_view text = scanner_.raw_value(field);
    size_t start = scanner_.offset_of(text);
    try {
      return Json::parse(text.begin(), text.end());
    } catch (const Json::parse_error& parse_error) {
      scanner_.fail_at(field, "not valid JSON", start + parse_error.byte - 1);
    } catch (const Json::exception& other) {  // A number too large for a double, for one.
      scanner_.fail_at(field, concat("not valid JSON: ", other.what()), start);
    }
  }

  const Json& member(const Json& object, const std::string& key, const std::string& field) const {
    if (!object.is_object()) error(field, "expected an object");
    auto found = object.find(key);
    if (found == object.end()) error(field + "." + key, "missing");
    return *found;
  }

  std::string string_member(const Json& object, const std::string& key,
                            const std::string& field) const {
    const Json& value = member(object, key, field);
    if (!value.is_string()) error(field + "." + key, "expected a string");
    return value.get<std::string>();
  }

  bool bool_member(const Json& object, const std::string& key, const std::string& field,
                   bool fallback) const {
    auto found = object.find(key);
    if (found == object.end() || found->is_null()) return fallback;
    if (!found->is_boolean()) error(field + "." + key, "expected true or false");
    return found->get<bool>();
  }

  void require_flag(const Json& object, const std::string& key, const std::string& field,
                    bool required) const {
    if (bool_member(object, key, field, required) != required) {
      error(field + "." + key, concat("must be ", required ? "true" : "false", " (the other ",
                                      "setting is not supported)"));
    }
  }

  void read_added_tokens(const Json& tokens) {
    if (!tokens.is_array()) error("added_tokens", "expected an array");
    for (size_t index = 0; index < tokens.size(); ++index) {
      std::string field = concat("added_tokens[", index, "]");
      const Json& token = tokens[index];
      AddedToken added;
      added.content = string_member(token, "content", field);
      const Json& id = member(token, "id", field);
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= id_limit_) {
        error(field + ".id", concat("expected a non-negative integer below ", id_limit_));
      }
      added.id = id.get<uint32_t>();
      added.special = bool_member(token, "special", field, false);
      added.normalized = bool_member(token, "normalized", field, !added.special);
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        require_flag(token, flag, field, false);
      }
      state_.added_tokens.push_back(std::move(added));
    }
  }

  void read_normalizer(const Json& normalizer) {
    if (normalizer.is_null()) return;
    std::string type = string_member(normalizer, "type", "normalizer");
    if (type != "Sequence") {
      read_normalizer_step(normalizer, "normalizer");
      return;
    }
    const Json& steps = member(normalizer, "normalizers", "normalizer");
    if (!steps.is_array()) error("normalizer.normalizers", "expected an array");
    for (size_t index = 0; index < steps.size(); ++index) {
      read_normalizer_step(steps[index], concat("normalizer.normalizers[", index, "]"));
    }
  }

  void read_normalizer_step(const Json& step, const std::string& field) {
    std::string type = string_member(step, "type", field);
    if (type == "NFC") {
      state_.normalizer.add_nfc();
    } else if (type == "Replace") {
      auto [pattern, content] = read_replace(step, field);
      state_.normalizer.add_replace(std::move(pattern), std::move(content));
    } else {
      error(field + ".type", concat("'", type, "' is not supported (only NFC, Replace or null)"));
    }
  }

  // A Replace step's literal pattern and its replacement.
  std::pair<std::string, std::string> read_replace(const Json& step, const std::string& field) {
    const Json& pattern = member(step, "pattern", field);
    if (!pattern.is_object() || !pattern.contains("String")) {
      error(field + ".pattern", "expected {\"String\": ...} (regex patterns are not supported)");
    }
    std::string literal = string_member(pattern, "String", field + ".pattern");
    if (literal.empty()) error(field + ".pattern.String", "must not be empty");
    return {literal, string_member(step, "content", field)};
  }

  void read_byte_level(const Json& step, const std::string& field) {
    require_flag(step, "add_prefix_space", field, false);
    require_flag(step, "use_regex", field, false);
  }

  void read_split(const Json& split, const std::string& field) {
    const Json& pattern = member(split, "pattern", field);
    std::string regex;
    if (pattern.is_object() && pattern.contains("Regex")) {
      regex = string_member(pattern, "Regex", field + ".pattern");
    } else if (pattern.is_object() && pattern.contains("String")) {
      regex = escape_regex(string_member(pattern, "String", field + ".pattern"));
    } else {
      error(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    std::string behavior = string_member(split, "behavior", field);
    RegexSplitter::Behavior split_behavior = RegexSplitter::Behavior::isolated;
    if (behavior == "MergedWithPrevious") {
      split_behavior = RegexSplitter::Behavior::merged_with_previous;
    } else if (behavior != "Isolated") {
      error(field + ".behavior",
            concat("'", behavior, "' is not supported (only Isolated or MergedWithPrevious)"));
    }
    require_flag(split, "invert", field, false);
    state_.splitters.push_back(std::make_unique<RegexSplitter>(
        regex, concat(state_.source_name, ": ", field, ".pattern"), split_behavior));
  }

  // Split steps, then at most one ByteLevel (which makes the BPE byte-level); null is none.
  void read_pre_tokenizer(const Json& pre_tokenizer) {
    if (pre_tokenizer.is_null()) return;
    std::string type = string_member(pre_tokenizer, "type", "pre_tokenizer");
    if (type != "Sequence") {
      read_pre_tokenizer_step(pre_tokenizer, "pre_tokenizer", true);
      return;
    }
    const Json& steps = member(pre_tokenizer, "pretokenizers", "pre_tokenizer");
    if (!steps.is_array() || steps.empty())
      error("pre_tokenizer.pretokenizers", "expected a non-empty array");
    for (size_t index = 0; index < steps.size(); ++index) {
      read_pre_tokenizer_step(steps[index], concat("pre_tokenizer.pretokenizers[", index, "]"),
                              index + 1 == steps.size());
    }
  }

  void read_pre_tokenizer_step(const Json& step, const std::string& field, bool last) {
    std::string type = string_member(step, "type", field);
    if (type == "Split" && !byte_level_pre_tokenizer_) {
      read_split(step, field);
    } else if (type == "ByteLevel" && last) {
      read_byte_level(step, field);
      byte_level_pre_tokenizer_ = true;
    } else {
      error(field + ".type", concat("'", type, "' is not supported here (expected Split steps, ",
                                    "then at most one ByteLevel)"));
    }
  }

  // Post-processors only add template tokens (a BOS) on request; encode() never adds them. The
  // special token that TemplateProcessing puts before a single sequence is kept for callers that
  // ask for it (Tokenizer::prefix_token_id).
  void read_post_processor(const Json& processor, const std::string& field) {
    if (processor.is_null()) return;
    std::string type = string_member(processor, "type", field);
    if (type == "ByteLevel") return;
    if (type == "TemplateProcessing") {
      const Json& single = member(processor, "single", field);
      if (single.is_array() && !single.empty() && single[0].is_object() &&
          single[0].contains("SpecialToken") && single[0]["SpecialToken"].is_object() &&
          single[0]["SpecialToken"].contains("id") && single[0]["SpecialToken"]["id"].is_string()) {
        state_.template_prefix_token = single[0]["SpecialToken"]["id"].get<std::string>();
      }
      return;
    }
    if (type == "Sequence") {
      const Json& steps = member(processor, "processors", field);
      if (!steps.is_array()) error(field + ".processors", "expected an array");
      for (size_t index = 0; index < steps.size(); ++index) {
        read_post_processor(steps[index], concat(field, ".processors[", index, "]"));
      }
      return;
    }
    error(field + ".type", concat("'", type, "' is not supported"));
  }

  // ByteLevel, or the SentencePiece-style steps: Replace steps, then ByteFallback, then Fuse
  // (each optional, alone or in a Sequence).
  void read_decoder(const Json& decoder) {
    if (decoder.is_null()) error("decoder", "must not be null");
    std::string type = string_member(decoder, "type", "decoder");
    TokenDecoder& reader = state_.decoder;
    if (type == "ByteLevel") {
      reader.byte_level = true;
      return;
    }
    reader.byte_level = false;
    if (type != "Sequence") {
      read_decoder_step(decoder, "decoder", 0);
      return;
    }
    const Json& steps = member(decoder, "decoders", "decoder");
    if (!steps.is_array()) error("decoder.decoders", "expected an array");
    int stage = 0;
    for (size_t index = 0; index < steps.size(); ++index) {
      stage = read_decoder_step(steps[index], concat("decoder.decoders[", index, "]"), stage);
    }
  }

  // Reads one step that may come at `stage` (0: Replace, 1: ByteFallback, 2: Fuse) or later;
  // returns the stage of the step after it.
  int read_decoder_step(const Json& step, const std::string& field, int stage) {
    std::string type = string_member(step, "type", field);
    int step_stage = type == "Replace" ? 0 : type == "ByteFallback" ? 1 : type == "Fuse" ? 2 : -1;
    if (step_stage < stage) {
      error(field + ".type",
            concat("'", type, "' is not supported here (only ByteLevel, or Replace steps, then ",
                   "ByteFallback, then Fuse)"));
    }
    if (type == "Replace") {
      auto replace = read_replace(step, field);
      // A pattern with a non-ASCII character never touches a "<0xNN>" byte token, so replacing
      // before or after ByteFallback gives the same text.
      if (is_ascii(replace.first)) {
        error(field + ".pattern.String",
              "must hold a non-ASCII character (only those are supported)");
      }
      state_.decoder.replacements.push_back(std::move(replace));
    } else if (type == "ByteFallback") {
      state_.decoder.byte_fallback = true;
    }
    return step_stage == 0 ? 0 : step_stage + 1;
  }

  void read_model() {
    std::string type;
    scanner_.for_each_member("model", [&](std::string_view key) {
      if (key == "type") {
        type = scanner_.string("model.type");
      } else if (key == "vocab") {
        read_vocab();
      } else if (key == "merges") {
        read_merges();
      } else if (key == "dropout") {
        if (!scanner_.null()) error("model.dropout", "must be null (dropout is not supported)");
      } else if (key == "continuing_subword_prefix" || key == "end_of_word_suffix") {
        std::string field = concat("model.", key);
        if (!scanner_.null() && !scanner_.string(field).empty()) {
          error(field, "must be null or empty (not supported)");
        }
      } else if (key == "byte_fallback") {
        byte_fallback_ = scanner_.boolean("model.byte_fallback");
      } else if (key == "ignore_merges") {
        state_.model.ignore_merges = scanner_.boolean("model.ignore_merges");
      } else if (key == "fuse_unk") {
        state_.model.fuse_unknown = scanner_.boolean("model.fuse_unk");
      } else if (key == "unk_token") {
        if (!scanner_.null()) unknown_token_ = std::string(scanner_.string("model.unk_token"));
      } else {
        scanner_.skip_value(concat("model.", key));
      }
    });
    if (type.empty()) error("model.type", "missing");
    if (type != "BPE") error("model.type", concat("'", type, "' is not supported (only BPE)"));
    if (!has_vocab_) error("model.vocab", "missing");
    if (!has_merges_) error("model.merges", "missing");
  }

  void read_vocab() {
    has_vocab_ = true;
    Vocabulary& vocabulary = state_.model.vocabulary;
    scanner_.for_each_member("model.vocab", [&](std::string_view token) {
      uint64_t id = scanner_.unsigned_integer("model.vocab");
      if (id >= id_limit_) {
        scanner_.fail_at("model.vocab",
                         concat("id ", id, " too large (ids here are below ", id_limit_, ")"));
      }
      if (!vocabulary.add(token, static_cast<uint32_t>(id))) {
        scanner_.fail_at("model.vocab", concat("id ", id, " appears twice"));
      }
    });
  }

  void read_merges() {
    has_merges_ = true;
    scanner_.for_each_element("model.merges", [&](size_t index) {
      if (scanner_.peek() == '"') {
        std::string_view line = scanner_.string("model.merges");
        size_t space = line.find(' ');
        if (space == std::string_view::npos ||
            line.find(' ', space + 1) != std::string_view::npos) {
          scanner_.fail_at(concat("model.merges[", index, "]"),
                           "expected two tokens separated by one space");
        }
        merges_.add(line.substr(0, space), line.substr(space + 1));
      } else if (scanner_.peek() == '[') {
        std::string field = "model.merges";
        size_t parts = 0, left_length = 0;
        scanner_.for_each_element(field, [&](size_t part) {
          std::string_view side = scanner_.string(field);
          if (part == 0) left_length = side.size();
          if (part < 2) merges_.append(side);
          ++parts;
        });
        if (parts != 2) {
          scanner_.fail_at(concat("model.merges[", index, "]"), "expected a pair of tokens");
        }
        merges_.end_merge(left_length);
      } else {
        scanner_.fail_at(concat("model.merges[", index, "]"),
                         "expected a string \"a b\" or a pair [\"a\", \"b\"]");
      }
    });
  }

  void finish() {
    Vocabulary& vocabulary = state_.model.vocabulary;
    const std::vector<AddedToken>& added_tokens = state_.added_tokens;
    for (size_t index = 0; index < added_tokens.size(); ++index) {
      const AddedToken& token = added_tokens[index];
      if (!vocabulary.add(token.content, token.id) && vocabulary.text(token.id) != token.content) {
        error(concat("added_tokens[", index, "].id"),
              concat(token.id, " is already the model's token '", vocabulary.text(token.id), "'"));
      }
    }
    if (std::optional<uint32_t> duplicate = vocabulary.build_index()) {
      error("model.vocab", concat("the token '", vocabulary.text(*duplicate),
                                  "' has more than one id (one is ", *duplicate, ")"));
    }
    index_added_tokens(state_);
    if (byte_level_pre_tokenizer_) {
      read_byte_alphabet();
    } else {
      read_character_tokens();
    }
    if (std::optional<BpeModel::MissingText> missing = state_.model.set_merges(merges_)) {
      error(concat("model.merges[", missing->rank, "]"),
            concat("'", missing->text, "' is not in the vocab"));
    }
  }

  // Byte-level BPE: the ByteLevel pre-tokenizer and decoder, a token for every byte.
  void read_byte_alphabet() {
    if (!state_.decoder.byte_level) {
      error("decoder.type", "must be ByteLevel with the ByteLevel pre-tokenizer");
    }
    if (byte_fallback_) {
      error("model.byte_fallback",
            "must be false with the ByteLevel pre-tokenizer (every byte "
            "has a token)");
    }
    if (std::optional<uint8_t> byte = state_.model.find_byte_tokens()) {
      error("model.vocab", concat("has no token for the byte ", int{*byte}, " ('",
                                  to_byte_level(std::string(1, static_cast<char>(*byte))), "')"));
    }
  }

  // SentencePiece-style BPE: characters are tokens, the rest byte fallback or the unknown token.
  void read_character_tokens() {
    BpeModel& model = state_.model;
    if (state_.decoder.byte_level) {
      error("decoder.type", "ByteLevel needs the ByteLevel pre-tokenizer");
    }
    if (byte_fallback_ != state_.decoder.byte_fallback) {
      error("decoder", concat("has ", state_.decoder.byte_fallback ? "a" : "no",
                              " ByteFallback step but model.byte_fallback is ",
                              byte_fallback_ ? "true" : "false"));
    }
    model.find_character_tokens(byte_fallback_);
    if (unknown_token_) {
      std::optional<uint32_t> id = model.vocabulary.find(*unknown_token_);
      if (!id) error("model.unk_token", concat("'", *unknown_token_, "' is not in the vocab"));
      model.unknown_id = *id;
    }
  }

  JsonScanner scanner_;
  TokenizerState& state_;
  MergeList merges_;
  // Ids index a table of the largest id's size (8 bytes an id), so they stay below the larger
  // of 2^20 and the file's size in bytes: a file's ids could go no higher without more holes than
  // tokens, and the table stays within 8 MiB or 8 bytes per byte of the file.
  const uint64_t id_limit_;
  bool has_vocab_ = false;
  bool has_merges_ = false;
  bool byte_level_pre_tokenizer_ = false;
  bool byte_fallback_ = false;
  std::optional<std::string> unknown_token_;
};

}  // namespace

void index_added_tokens(TokenizerState& state) {
  state.special.assign(state.model.vocabulary.size(), false);
  std::vector<AddedTokenMatcher::Token> raw, normalized;
  for (const AddedToken& token : state.added_tokens) {
    state.special[token.id] = token.special;
    // A normalized token is looked for in normalized text, so it is normalized too.
    std::string buffer;
    std::string_view content = token.normalized && !state.normalizer.empty()
                                   ? state.normalizer.normalize(token.content, buffer)
                                   : std::string_view(token.content);
    (token.normalized ? normalized : raw)
        .push_back({std::string(content), token.id, token.special});
  }
  state.raw_added_tokens.assign(std::move(raw));
  state.normalized_added_tokens.assign(std::move(normalized));
}

void parse_tokenizer_json(std::string_view json, TokenizerState& state) {
  TokenizerJsonReader(json, state).read();
}

}  // namespace fornace::text
