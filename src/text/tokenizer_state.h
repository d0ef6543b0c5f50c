// The tokenizer's state behind Tokenizer::Impl, shared by the loaders (tokenizer_json.cpp,
// gguf_tokenizer.cpp) and tokenizer.cpp.
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

struct GgufVocabulary;

// A token matched in the text before BPE, as tokenizer.json's added_tokens lists it.
struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;     // Matched only when encode parses special tokens; skippable in decode.
  bool normalized = false;  // Matched in the normalized text rather than the raw text.
};

struct TokenizerState {
  std::string source_name;
  BpeModel model;
  std::vector<AddedToken> added_tokens;
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

// Fills `state.special` and the added-token matchers from `state.added_tokens`, once the
// normalizer is set and the vocabulary holds every id.
void index_added_tokens(TokenizerState& state);

// Fills `state` from tokenizer.json text; errors name `state.source_name` and the field.
void parse_tokenizer_json(std::string_view json, TokenizerState& state);

// Fills `state` from the tokenizer.ggml.* values of a GGUF file; errors name `state.source_name`
// and the key.
void build_from_gguf_vocabulary(const GgufVocabulary& vocabulary, TokenizerState& state);

}  // namespace fornace::text
