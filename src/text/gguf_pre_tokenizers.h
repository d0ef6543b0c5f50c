// The pre-tokenizers that the tokenizer.ggml.pre names of byte-level BPE stand for, as
// tokenizer.json writes them (llama.cpp's llama-vocab.cpp has the same regexes).
#pragma once

#include <string_view>
#include <vector>

#include "text/tokenizer_state.h"

namespace fornace::text {

struct GgufPreTokenizer {
  std::vector<std::string_view> names;    // The first is the one Fornace writes.
  std::vector<std::string_view> regexes;  // Isolated Split steps, in order.
  bool nfc;                               // The NFC normalizer (Qwen's tokenizer.json has it).
  bool ignore_merges;                     // A piece that is a whole token is taken as it is.
  bool add_bos;                           // llama.cpp's default when add_bos_token is unset.
};

const std::vector<GgufPreTokenizer>& gguf_pre_tokenizers();

// The pre-tokenizer `name` stands for, or nullptr.
const GgufPreTokenizer* find_gguf_pre_tokenizer(std::string_view name);

// Gives `state` the pre-tokenizer's normalizer, splits and ignore_merges.
void apply_gguf_pre_tokenizer(const GgufPreTokenizer& pre_tokenizer, TokenizerState& state);

// The pre-tokenizer whose normalizer, splits and ignore_merges are those of `state`, or nullptr.
const GgufPreTokenizer* match_gguf_pre_tokenizer(const TokenizerState& state);

}  // namespace fornace::text
