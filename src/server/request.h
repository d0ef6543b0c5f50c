// Parses and validates the bodies of POST /v1/chat/completions and /v1/completions into a
// CompletionRequest for the scheduler; every fault is an ApiError with OpenAI's status and shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler.h"
#include "text/token_trie.h"
#include "text/tokenizer.h"

namespace fornace::server {

enum class Endpoint { chat, completions };

// What the parser needs to know of the served model.
struct ServedModel {
  std::string id;  // The name clients give as `model`.
  const Tokenizer* tokenizer = nullptr;
  int64_t context = 0;     // Positions a slot holds (prompt + completion).
  int64_t vocab_size = 0;  // The model's embedding rows.
  // For response_format json_object and json_schema (refused without them): the ids that end a
  // completion, and the tokenizer's token bytes as a trie.
  std::vector<uint32_t> eos_ids;
  std::shared_ptr<const text::TokenTrie> token_trie;
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::chat;
  CompletionRequest completion;
  bool seeded = false;  // `seed` was given; otherwise the server picks one.
  int64_t choices = 1;  // `n`: completions of the prompt, seeds seed, seed + 1, ...
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // The form of the tool calls to parse out of the answer (none: its text is all content).
  text::ToolCallFormat tool_calls = text::ToolCallFormat::none;
};

// The sampling defaults of the server: OpenAI's temperature 1 and top_p 1, no repeat penalty.
SamplerOptions server_sampling_defaults();

// A response_format of json_object or json_schema becomes a GrammarConstraint in the request's
// sampling options. Throws ApiError: 400 for malformed JSON, wrong types, values out of range,
// empty or unknown messages, a schema that cannot be compiled (the parameter named, the message
// naming the keyword and where it is), a prompt that leaves no room in the context (code "context_length_exceeded");
// 404 for a model other than the served one (code "model_not_found").
ApiRequest parse_request(Endpoint endpoint, std::string_view body, const ServedModel& model);

}  // namespace fornace::server
