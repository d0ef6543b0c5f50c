// BPE tokenizer read from a Hugging Face tokenizer.json (byte-level as Qwen's and Llama 3's, or
// SentencePiece-style with byte fallback as Gemma 3's) or from a GGUF file's vocabulary, with
// added tokens, the normalizer and split regexes (PCRE2), an incremental decoder and the
// checkpoint's chat template.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tool_calls.h"

namespace fornace {

class ModelFiles;  // io/model_files.h

struct ModelConfig;

namespace text {
struct GgufVocabulary;
}

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class Tokenizer {
 public:
  // Reads <directory>/tokenizer.json and, when present, <directory>/tokenizer_config.json (eos
  // token, chat_template, bos_token) of a checkpoint; or a GGUF file's tokenizer keys, through
  // the parse that `files` holds (the model's, when it loads from the same files).
  static Tokenizer load(const ModelFiles& files);
  // The same for files opened here (for a tokenizer without its model).
  static Tokenizer load(const std::string& directory);
  // Parses tokenizer.json text; errors name `source_name` and the offending field.
  static Tokenizer from_json(std::string_view json, const std::string& source_name);
  // Builds the tokenizer from a GGUF file's tokenizer.ggml.* values (text/gguf_vocabulary.h):
  // model gpt2 with a supported tokenizer.ggml.pre, or llama. Its prefix token is the bos token
  // when add_bos_token says so (unset: llama.cpp's default); errors name `source_name` and the
  // key.
  static Tokenizer from_gguf_vocabulary(const text::GgufVocabulary& vocabulary,
                                        const std::string& source_name);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text to ids, as Hugging Face's encode(text, add_special_tokens=False): the post-processor's
  // template tokens (Gemma's and Llama 3.1's BOS) are not added. Added tokens in the text become
  // their ids (special ones only when `parse_special` is set). Invalid UTF-8 throws Error naming
  // the byte offset.
  std::vector<uint32_t> encode(std::string_view text, bool parse_special = true) const;
  // Ids to text; ids out of range throw Error. Invalid UTF-8 from partial tokens is replaced
  // with U+FFFD.
  std::string decode(const std::vector<uint32_t>& ids, bool skip_special = false) const;
  // The raw bytes of one token (its byte-level form decoded, or "<0xNN>" as its byte and the
  // decoder's Replace steps applied).
  std::string token_bytes(uint32_t id) const;

  size_t vocab_size() const;  // Largest id + 1, added tokens included.
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  bool is_special(uint32_t id) const;
  // The eos token named by tokenizer_config.json, when there is one.
  std::optional<uint32_t> eos_token_id() const;
  // The token that tokenizer.json's post-processor puts before a single text (Gemma's <bos>),
  // which Hugging Face's encode adds by default; none for Qwen.
  std::optional<uint32_t> prefix_token_id() const;

  // The prompt text for `messages`: tokenizer_config.json's chat_template rendered as transformers
  // renders it (`enable_thinking`, when given, is passed to the template as Qwen3's is). Without
  // a template, ChatML ("<|im_start|>role\ncontent<|im_end|>\n" per message, plus
  // "<|im_start|>assistant\n" when `add_generation_prompt` is set) when the vocabulary has its
  // tokens; otherwise an Error that names --prompt.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt,
                                  std::optional<bool> enable_thinking = std::nullopt) const;
  // The form of tool calls that the chat template asks the model for (none without tools in it).
  text::ToolCallFormat tool_call_format() const;
  // The same for a conversation in OpenAI's chat form given as JSON text, whose key order is
  // kept (it shows in what a template prints with tojson). `messages_json`: an array of
  // {"role", "content"} with role system, user, assistant or tool; an assistant's may carry
  // "tool_calls" (content then null or absent), a tool's "tool_call_id" and "name". Members are
  // passed to the template as given (a tool call's "arguments" as an object or a JSON string
  // alike). `tools_json`: an array of {"type": "function", "function": {"name", "description",
  // "parameters"}}, or empty or null for none (the template sees None). Without a template, ChatML
  // takes string contents and no tools. Bad JSON, or a message that is not an object with one of
  // those roles, throws Error naming "messages[i]" or "tools".
  std::string apply_chat_template_json(std::string_view messages_json, std::string_view tools_json,
                                       bool add_generation_prompt,
                                       std::optional<bool> enable_thinking = std::nullopt) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class IncrementalDecoder;
};

// The ids that end a generation: config.json's eos_token_id (generation_config.json's first),
// else the tokenizer's eos token (none when `tokenizer` is null).
std::vector<int64_t> end_of_sequence_ids(const ModelConfig& config, const Tokenizer* tokenizer);

// Turns a stream of ids into text pieces that are always whole UTF-8 sequences: bytes of an
// unfinished character are held until the character completes.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  // The text that became complete with this id (may be empty). An id the tokenizer lacks (a
  // model output from the embedding rows past the vocabulary) is a piece of no text.
  std::string push(uint32_t id);
  // Whatever is still held, with incomplete sequences replaced by U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool at_start_ = true;  // No text has come out yet.
  std::string pending_;
};

}  // namespace fornace
