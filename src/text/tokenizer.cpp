// Tokenizer: loading, the encode pipeline (added tokens, normalizer, split, BPE), decoding, the
// chat template (the checkpoint's own, or ChatML) and the incremental decoder.
#include "text/tokenizer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/config.h"
#include "io/files.h"
#include "io/model_files.h"
#include "text/chat_template.h"
#include "text/gguf_metadata.h"
#include "text/gguf_vocabulary.h"
#include "text/tokenizer_config.h"
#include "text/tokenizer_state.h"
#include "text/utf8.h"

namespace fornace {

struct Tokenizer::Impl : text::TokenizerState {
  text::TokenizerConfig config;
};

namespace {

// Encodes text that holds no raw added token: the normalizer, normalized added tokens, the
// regex splits and BPE. Buffers are kept across calls of one encode().
class SegmentEncoder {
 public:
  SegmentEncoder(const text::TokenizerState& state, bool parse_special, std::vector<uint32_t>& ids)
      : state_(state),
        parse_special_(parse_special),
        ids_(ids),
        cache_lock_(state.model.lock_cache()) {}

  void encode(std::string_view segment) {
    if (segment.empty()) return;
    segment = state_.normalizer.normalize(segment, normalized_);
    const text::AddedTokenMatcher& added = state_.normalized_added_tokens;
    size_t position = 0;
    if (!added.empty()) {
      while (auto match = added.find(segment, position, parse_special_)) {
        split_and_merge(segment.substr(position, match->start - position));
        ids_.push_back(match->id);
        position = match->start + match->length;
      }
    }
    split_and_merge(segment.substr(position));
  }

 private:
  void split_and_merge(std::string_view text) {
    if (text.empty()) return;
    pieces_.assign(1, text);
    for (const auto& splitter : state_.splitters) {
      next_pieces_.clear();
      for (std::string_view piece : pieces_) splitter->split(piece, next_pieces_);
      pieces_.swap(next_pieces_);
    }
    bool use_cache = cache_lock_.owns_lock();
    for (std::string_view piece : pieces_) state_.model.encode_piece(piece, ids_, use_cache);
  }

  const text::TokenizerState& state_;
  bool parse_special_;
  std::vector<uint32_t>& ids_;
  std::string normalized_;
  std::vector<std::string_view> pieces_, next_pieces_;
  std::unique_lock<std::mutex> cache_lock_;  // The piece cache, held for the whole call.
};

// A file mapped read-only, so that a large tokenizer.json (Gemma 3's is 33 MB) is read in place:
// reading it into a string cost a fresh process 20 ms of its load (the copy and the zeroed pages
// behind it). As with the weights' mappings, the file must not be truncated while it loads.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : file_(path) {
    if (file_.size() == 0) return;
    void* address =
        ::mmap(nullptr, file_.size(), PROT_READ, MAP_PRIVATE | MAP_POPULATE, file_.descriptor(), 0);
    if (address == MAP_FAILED) fail(path, ": cannot map the file: ", std::strerror(errno));
    data_ = static_cast<const char*>(address);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), file_.size());
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view text() const { return {data_, data_ != nullptr ? file_.size() : 0}; }

 private:
  ReadOnlyFile file_;
  const char* data_ = nullptr;
};

// Throws unless `id` names a token; `operation` starts the message.
void check_id(const text::TokenizerState& state, uint32_t id, const char* operation) {
  const text::Vocabulary& vocabulary = state.model.vocabulary;
  if (id >= vocabulary.size()) {
    fail(operation, ": token id ", id, " is out of range (", state.source_name, " has ids 0 to ",
         vocabulary.size() - 1, ")");
  }
  if (!vocabulary.contains(id))
    fail(operation, ": ", state.source_name, " has no token with id ", id);
}

using text::TemplateValue;

// A conversation as ChatML ("<|im_start|>role\ncontent<|im_end|>\n" per message), for a
// tokenizer without a chat template whose vocabulary has those tokens.
std::string render_chat_ml(const text::TokenizerState& state, const TemplateValue& messages,
                           const TemplateValue& tools, bool add_generation_prompt) {
  for (const char* marker : {"<|im_start|>", "<|im_end|>"}) {
    if (!state.model.vocabulary.find(marker)) {
      fail("chat template: ", state.source_name,
           " has no chat_template (tokenizer_config.json) and no ", marker,
           " token for ChatML; pass the prompt text as the model expects it with --prompt instead");
    }
  }
  if (tools.kind() == TemplateValue::Kind::list && !tools.as_list().empty()) {
    fail("chat template: ", state.source_name,
         " has no chat_template (tokenizer_config.json) to show tools with");
  }
  std::string prompt;
  for (const TemplateValue& message : messages.as_list()) {
    const TemplateValue* content = message.find("content");
    if (!content || content->kind() != TemplateValue::Kind::string || message.find("tool_calls")) {
      fail("chat template: ", state.source_name,
           " has no chat_template (tokenizer_config.json): ChatML takes only string contents");
    }
    prompt += "<|im_start|>" + message.find("role")->as_string() + "\n" + content->as_string() +
              "<|im_end|>\n";
  }
  if (add_generation_prompt) prompt += "<|im_start|>assistant\n";
  return prompt;
}

// The prompt for `messages` and `tools` (checked by the caller): the checkpoint's chat template,
// else ChatML.
std::string render_chat(const text::TokenizerState& state, const text::TokenizerConfig& config,
                        TemplateValue messages, TemplateValue tools, bool add_generation_prompt,
                        std::optional<bool> enable_thinking) {
  if (!config.chat_template) return render_chat_ml(state, messages, tools, add_generation_prompt);
  TemplateValue::Dict variables = text::chat_template_variables(
      config, std::move(messages), add_generation_prompt, std::move(tools));
  if (enable_thinking)
    variables.emplace_back("enable_thinking", TemplateValue::boolean(*enable_thinking));
  return text::ChatTemplate(*config.chat_template).render(variables);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& source_name) {
  auto impl = std::make_unique<Impl>();
  impl->source_name = source_name;
  text::parse_tokenizer_json(json, *impl);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_gguf_vocabulary(const text::GgufVocabulary& vocabulary,
                                          const std::string& source_name) {
  auto impl = std::make_unique<Impl>();
  impl->source_name = source_name;
  text::build_from_gguf_vocabulary(vocabulary, *impl);
  impl->config.chat_template = vocabulary.chat_template;
  if (vocabulary.bos_token_id) impl->config.bos_token = vocabulary.tokens[*vocabulary.bos_token_id];
  if (vocabulary.eos_token_id) impl->config.eos_token = vocabulary.tokens[*vocabulary.eos_token_id];
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& directory) {
  return load(*ModelFiles::open(directory));
}

Tokenizer Tokenizer::load(const ModelFiles& files) {
  const std::string& directory = files.path();
  if (files.is_gguf()) return from_gguf_vocabulary(read_gguf_vocabulary(*files.gguf()), directory);
  std::string path = directory + "/tokenizer.json";
  Tokenizer tokenizer = from_json(MappedFile(path).text(), path);
  std::string config_path = directory + "/tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    text::TokenizerConfig config = text::read_tokenizer_config(read_file(config_path), config_path);
    if (config.eos_token) {
      std::optional<uint32_t> id = tokenizer.impl_->model.vocabulary.find(*config.eos_token);
      if (!id) {
        fail(config_path, ": eos_token: '", *config.eos_token,
             "' is not a token of the vocabulary");
      }
      tokenizer.impl_->eos_token_id = id;
    }
    tokenizer.impl_->config = std::move(config);
  }
  return tokenizer;
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  size_t invalid = text::first_invalid_utf8(text);
  if (invalid != std::string_view::npos) {
    fail("encode: the text is not valid UTF-8 at byte offset ", invalid, " (byte 0x", std::hex,
         static_cast<int>(static_cast<uint8_t>(text[invalid])), ")");
  }
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  SegmentEncoder segments(*impl_, parse_special, ids);
  size_t position = 0;
  if (!impl_->raw_added_tokens.empty()) {
    while (auto match = impl_->raw_added_tokens.find(text, position, parse_special)) {
      segments.encode(text.substr(position, match->start - position));
      ids.push_back(match->id);
      position = match->start + match->length;
    }
  }
  segments.encode(text.substr(position));
  return ids;
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids, bool skip_special) const {
  std::string text, pending;
  for (uint32_t id : ids) {
    check_id(*impl_, id, "decode");
    if (skip_special && impl_->special[id]) continue;
    impl_->decoder.push(impl_->model.vocabulary.text(id), pending, text);
  }
  impl_->decoder.finish(pending, text);
  bool at_start = true;
  impl_->decoder.strip_start(text, at_start);
  return text;
}

std::string Tokenizer::token_bytes(uint32_t id) const {
  check_id(*impl_, id, "token_bytes");
  std::string bytes;
  impl_->decoder.append_bytes(impl_->model.vocabulary.text(id), bytes);
  return bytes;
}

size_t Tokenizer::vocab_size() const { return impl_->model.vocabulary.size(); }

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->model.vocabulary.find(token);
}

bool Tokenizer::is_special(uint32_t id) const {
  return id < impl_->special.size() && impl_->special[id];
}

std::optional<uint32_t> Tokenizer::eos_token_id() const { return impl_->eos_token_id; }

std::optional<uint32_t> Tokenizer::prefix_token_id() const {
  if (!impl_->template_prefix_token) return std::nullopt;
  return token_to_id(*impl_->template_prefix_token);
}

std::string Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt,
                                           std::optional<bool> enable_thinking) const {
  TemplateValue::List turns;
  for (const ChatMessage& message : messages) {
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      fail("chat template: unknown role '", message.role, "' (expected system, user or assistant)");
    }
    turns.push_back(TemplateValue::dict({{"role", TemplateValue::string(message.role)},
                                         {"content", TemplateValue::string(message.content)}}));
  }
  return render_chat(*impl_, impl_->config, TemplateValue::list(std::move(turns)),
                     TemplateValue::none(), add_generation_prompt, enable_thinking);
}

text::ToolCallFormat Tokenizer::tool_call_format() const {
  const std::optional<std::string>& source = impl_->config.chat_template;
  return source ? text::tool_call_format(*source) : text::ToolCallFormat::none;
}

std::string Tokenizer::apply_chat_template_json(std::string_view messages_json,
                                                std::string_view tools_json,
                                                bool add_generation_prompt,
                                                std::optional<bool> enable_thinking) const {
  TemplateValue messages = TemplateValue::from_json(messages_json, "messages");
  if (messages.kind() != TemplateValue::Kind::list) fail("messages: expected an array");
  for (size_t index = 0; index < messages.as_list().size(); ++index) {
    const TemplateValue& message = messages.as_list()[index];
    if (message.kind() != TemplateValue::Kind::dict)
      fail("messages[", index, "]: expected an object");
    const TemplateValue* role = message.find("role");
    if (!role || role->kind() != TemplateValue::Kind::string ||
        (role->as_string() != "system" && role->as_string() != "user" &&
         role->as_string() != "assistant" && role->as_string() != "tool")) {
      fail("messages[", index, "].role: expected system, user, assistant or tool");
    }
  }
  TemplateValue tools = TemplateValue::none();
  if (!tools_json.empty()) {
    tools = TemplateValue::from_json(tools_json, "tools");
    if (tools.kind() != TemplateValue::Kind::list && tools.kind() != TemplateValue::Kind::none)
      fail("tools: expected an array");
    for (size_t index = 0;
         tools.kind() == TemplateValue::Kind::list && index < tools.as_list().size(); ++index) {
      if (tools.as_list()[index].kind() != TemplateValue::Kind::dict)
        fail("tools[", index, "]: expected an object");
    }
  }
  return render_chat(*impl_, impl_->config, std::move(messages), std::move(tools),
                     add_generation_prompt, enable_thinking);
}

std::vector<int64_t> end_of_sequence_ids(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int64_t> ids = config.eos_token_ids;
  if (ids.empty() && tokenizer && tokenizer->eos_token_id())
    ids.push_back(*tokenizer->eos_token_id());
  return ids;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(uint32_t id) {
  const text::TokenizerState& impl = *tokenizer_.impl_;
  // A model's embedding often has more rows than its tokenizer has tokens: such an id is a valid
  // model output with no text.
  if (id >= impl.model.vocabulary.size() || !impl.model.vocabulary.contains(id)) return {};
  if (skip_special_ && impl.special[id]) return {};
  std::string text;
  impl.decoder.push(impl.model.vocabulary.text(id), pending_, text);
  impl.decoder.strip_start(text, at_start_);
  return text;
}

std::string IncrementalDecoder::flush() {
  std::string text;
  tokenizer_.impl_->decoder.finish(pending_, text);
  tokenizer_.impl_->decoder.strip_start(text, at_start_);
  return text;
}

}  // namespace fornace
