// The table of tokenizer.ggml.pre names, and how a tokenizer state gets or matches one.
#include "text/gguf_pre_tokenizers.h"

#include <algorithm>

#include "core/error.h"
#include "text/gguf_vocabulary.h"

namespace fornace::text {
namespace {

// GPT-2's ByteLevel regex (use_regex: true).
constexpr std::string_view gpt2_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Normalizer normalizer_of(const GgufPreTokenizer& pre_tokenizer) {
  Normalizer normalizer;
  if (pre_tokenizer.nfc) normalizer.add_nfc();
  return normalizer;
}

}  // namespace

const std::vector<GgufPreTokenizer>& gguf_pre_tokenizers() {
  static const std::vector<GgufPreTokenizer> table = {
      // Qwen2, Qwen2.5 and Qwen3.
      {{"qwen2"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true,
       false,
       false},
      // Llama 3, 3.1, 3.2.
      {{"llama-bpe", "llama3", "llama-v3"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false,
       true,
       true},
      // SmolLM and SmolLM2: Digits (individual_digits), then GPT-2's ByteLevel regex.
      {{"smollm"}, {R"(\p{N})", gpt2_regex}, false, false, false},
      {{"gpt-2"}, {gpt2_regex}, false, false, false},
  };
  return table;
}

const GgufPreTokenizer* find_gguf_pre_tokenizer(std::string_view name) {
  for (const GgufPreTokenizer& pre_tokenizer : gguf_pre_tokenizers()) {
    if (std::ranges::find(pre_tokenizer.names, name) != pre_tokenizer.names.end())
      return &pre_tokenizer;
  }
  return nullptr;
}

void apply_gguf_pre_tokenizer(const GgufPreTokenizer& pre_tokenizer, TokenizerState& state) {
  state.normalizer = normalizer_of(pre_tokenizer);
  state.model.ignore_merges = pre_tokenizer.ignore_merges;
  state.splitters.clear();
  for (std::string_view regex : pre_tokenizer.regexes) {
    state.splitters.push_back(std::make_unique<RegexSplitter>(
        std::string(regex),
        concat(state.source_name, ": ", gguf_key::pre, " '", pre_tokenizer.names.front(), "'")));
  }
}

const GgufPreTokenizer* match_gguf_pre_tokenizer(const TokenizerState& state) {
  for (const GgufPreTokenizer& pre_tokenizer : gguf_pre_tokenizers()) {
    bool same_splits = std::ranges::equal(
        state.splitters, pre_tokenizer.regexes, [](const auto& splitter, std::string_view regex) {
          return splitter->pattern() == regex &&
                 splitter->behavior() == RegexSplitter::Behavior::isolated;
        });
    if (same_splits && state.normalizer == normalizer_of(pre_tokenizer) &&
        state.model.ignore_merges == pre_tokenizer.ignore_merges)
      return &pre_tokenizer;
  }
  return nullptr;
}

std::string supported_gguf_pre_names() {
  std::string names;
  for (const GgufPreTokenizer& pre_tokenizer : gguf_pre_tokenizers()) {
    for (std::string_view name : pre_tokenizer.names) {
      names += names.empty() ? "" : ", ";
      names += name;
    }
  }
  return names;
}

}  // namespace fornace::text
