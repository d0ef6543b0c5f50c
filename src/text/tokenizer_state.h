// The tokenizer's state behind Tokenizer::Impl, shared by the loader (tokenizer_json.cpp) and
// tokenizer.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"

namespace fornace::text {

struct TokenizerState {
  std::string source_name;
  BpeModel model;
  std::vector<bool> special;  // By id: an added token marked special.
  Normalizer normalizer;
  // The Split regexes, applied in order; a ByteLevel step after them is the BPE's byte alphabet.
  std::vector<std::unique_ptr<RegexSplitter>> splitters;
  TokenDecoder decoder;
  AddedTokenMatcher raw_added_tokens;         // Matched before normalization.
  AddedTokenMatcher normalized_added_tokens;  // Matched in the normalized text.
  std::optional<uint32_t> eos_token_id;
  // The special token that the post-processor's template puts before a single sequence (Gemma's
  // <bos>): what Hugging Face's encode adds with add_special_tokens=True.
  std::optional<std::string> template_prefix_token;
};

// Fills `state` from tokenizer.json text; errors name `state.source_name` and the field.
void parse_tokenizer_json(std::string_view json, TokenizerState& state);

// Reads the eos token from tokenizer_config.json text into `state`.
void parse_tokenizer_config(std::string_view json, const std::string& source_name,
                            TokenizerState& state);

}  // namespace fornace::text
