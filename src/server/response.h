// The response bodies of the completion endpoints: chat.completion and text_completion objects,
// and the server-sent events of a streamed completion.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "server/request.h"
#include "text/tool_calls.h"

namespace fornace::server {

// What every object of one response shares.
struct ResponseIdentity {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds.
  std::string model;
};

// A fresh identity for `endpoint`: a random id with the endpoint's prefix, created now.
ResponseIdentity new_identity(Endpoint endpoint, const std::string& model);

// OpenAI's finish_reason: "stop" or "length"; a completion cancelled by the server (shutdown)
// reads "stop", as OpenAI has no other word for it.
const char* api_finish_reason(FinishReason reason);
// The same for a choice that called tools: "tool_calls" unless it ran out of tokens.
const char* api_finish_reason(FinishReason reason, bool called_tools);

// The token counts of a response; cached_tokens counts the prompt tokens reused from a slot's
// cache.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};
nlohmann::json usage_json(const Usage& usage);

// One choice of a whole (non-streamed) response.
struct Choice {
  std::string text;
  FinishReason finish_reason = FinishReason::length;
  nlohmann::json logprobs;  // logprobs_json, or null when the request did not ask.
  std::vector<text::ToolCall> tool_calls;  // Parsed from the answer: then its text is the rest.
};

// The whole (non-streamed) response.
nlohmann::json completion_json(Endpoint endpoint, const ResponseIdentity& identity,
                               const std::vector<Choice>& choices, const Usage& usage);

// A choice's logprobs for `entries`: chat's {"content": [{token, logprob, bytes,
// top_logprobs}], "refusal": null}, or a text completion's {tokens, token_logprobs,
// top_logprobs, text_offset}, whose offsets count from `text_offset` bytes of the choice's text.
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& entries,
                             const Tokenizer& tokenizer, int64_t text_offset = 0);

// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump_json(const nlohmann::json& value);

// One server-sent event carrying `value`: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line that clients ignore; written while a stream waits, it finds closed connections.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

// Turns the updates of a response's choices into the events of its stream: per choice,
// chat.completion.chunk deltas (the first with role "assistant") or text_completion chunks and a
// last chunk with the finish_reason; once every choice has ended, a usage chunk (choices: [])
// when asked for, then [DONE].
class SseStream {
 public:
  SseStream(Endpoint endpoint, ResponseIdentity identity, bool include_usage,
            int64_t prompt_tokens, int64_t choices = 1);
  // The events for choice `index`'s `update`, whose tokens' `logprobs` (logprobs_json, or null)
  // go with its text (empty when it carries nothing new).
  // `calls`: pieces of tool calls that come with the update's text.
  std::string events(const CompletionUpdate& update, int64_t index = 0,
                     const nlohmann::json& logprobs = nullptr,
                     const std::vector<text::ToolCallDelta>& calls = {});
  bool finished() const { return finished_; }

 private:
  struct ChoiceState {
    bool role_sent = false;
    bool finished = false;
    bool called_tools = false;
  };
  nlohmann::json chunk(int64_t index, const std::string& text, const char* finish_reason,
                       const nlohmann::json& logprobs,
                       const std::vector<text::ToolCallDelta>& calls = {});

  Endpoint endpoint_;
  ResponseIdentity identity_;
  bool include_usage_;
  Usage usage_;
  std::vector<ChoiceState> choices_;
  bool finished_ = false;
};

}  // namespace fornace::server
