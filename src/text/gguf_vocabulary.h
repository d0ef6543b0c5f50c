// The tokenizer.ggml.* values of a GGUF file (as llama.cpp's converter writes them), and how to
// make them from a Hugging Face tokenizer.json for `fornace quantize`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fornace::text {

// The metadata keys, for readers, writers and error messages.
namespace gguf_key {
inline constexpr const char* model = "tokenizer.ggml.model";
inline constexpr const char* pre = "tokenizer.ggml.pre";
inline constexpr const char* tokens = "tokenizer.ggml.tokens";
inline constexpr const char* token_type = "tokenizer.ggml.token_type";
inline constexpr const char* merges = "tokenizer.ggml.merges";
inline constexpr const char* scores = "tokenizer.ggml.scores";
inline constexpr const char* bos_token_id = "tokenizer.ggml.bos_token_id";
inline constexpr const char* eos_token_id = "tokenizer.ggml.eos_token_id";
inline constexpr const char* unknown_token_id = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* padding_token_id = "tokenizer.ggml.padding_token_id";
inline constexpr const char* add_bos_token = "tokenizer.ggml.add_bos_token";
inline constexpr const char* add_eos_token = "tokenizer.ggml.add_eos_token";
inline constexpr const char* add_space_prefix = "tokenizer.ggml.add_space_prefix";
inline constexpr const char* chat_template = "tokenizer.chat_template";
}  // namespace gguf_key

// The values of tokenizer.ggml.token_type.
enum class GgufTokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,       // Special: matched in text only when encode parses special tokens.
  user_defined = 4,  // Matched in the raw text before the model, always.
  unused = 5,
  byte = 6,  // "<0xNN>": SentencePiece's byte fallback.
};

// One field per key; a key the file lacks is an empty string, vector or optional.
struct GgufVocabulary {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece).
  std::string pre;    // The pre-tokenizer's name ("qwen2", "llama-bpe", ...): gpt2 only.
  std::vector<std::string> tokens;   // By id.
  std::vector<int32_t> token_types;  // GgufTokenType by id; empty: all normal.
  std::vector<std::string> merges;   // "left right", by rank: gpt2 only.
  std::vector<float> scores;         // By id: llama only (the higher merges first).
  std::optional<uint32_t> bos_token_id, eos_token_id, unknown_token_id, padding_token_id;
  // Unset: llama.cpp's defaults (add_bos true for llama and llama-bpe, add_space_prefix true for
  // llama).
  std::optional<bool> add_bos_token, add_eos_token, add_space_prefix;
  std::optional<std::string> chat_template;
};

// The values llama.cpp's converter (convert_hf_to_gguf.py) writes for a tokenizer.json and its
// tokenizer_config.json (empty when there is none): byte-level BPE as model gpt2 with the pre
// name of its pre-tokenizer (Qwen2.5 and Qwen3: qwen2, Llama 3: llama-bpe), SentencePiece-style
// BPE with byte fallback (Gemma 3) as model llama with scores. Given `embedding_rows` (0: as
// many as the tokenizer has ids), there are exactly that many tokens, since llama.cpp requires
// token_embd's rows to equal the token count: ids without a token become "[PAD<id>]" of type
// unused, and added tokens past the rows are left out, as the converter leaves them. A tokenizer
// these keys cannot express throws Error naming `source_name` and what is missing.
GgufVocabulary gguf_vocabulary_from_tokenizer_json(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config_json,
                                                   const std::string& source_name,
                                                   size_t embedding_rows = 0);

// The same from <directory>/tokenizer.json and, when present, <directory>/tokenizer_config.json.
GgufVocabulary load_gguf_vocabulary(const std::string& directory, size_t embedding_rows = 0);

// The tokenizer.ggml.pre names that Fornace reads with the gpt2 model, comma-separated.
std::string supported_gguf_pre_names();

}  // namespace fornace::text
