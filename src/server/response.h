// The response bodies of the completion endpoints: chat.completion and text_completion objects,
// and the server-sent events of a streamed completion.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/scheduler.h"
#include "server/request.h"

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

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// The whole (non-streamed) response.
nlohmann::json completion_json(Endpoint endpoint, const ResponseIdentity& identity,
                               const std::string& text, FinishReason reason, int64_t prompt_tokens,
                               int64_t completion_tokens);

// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump_json(const nlohmann::json& value);

// One server-sent event carrying `value`: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line that clients ignore; written while a stream waits, it finds closed connections.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

// Turns a completion's updates into the events of its stream: chat.completion.chunk deltas (the
// first with role "assistant") or text_completion chunks, a last chunk with the finish_reason,
// a usage chunk (choices: []) when asked for, then [DONE].
class SseStream {
 public:
  SseStream(Endpoint endpoint, ResponseIdentity identity, bool include_usage,
            int64_t prompt_tokens);
  // The events for `update` (empty when it carries nothing new).
  std::string events(const CompletionUpdate& update);
  bool finished() const { return finished_; }

 private:
  nlohmann::json chunk(const std::string& text, const char* finish_reason);

  Endpoint endpoint_;
  ResponseIdentity identity_;
  bool include_usage_;
  int64_t prompt_tokens_;
  bool role_sent_ = false;
  bool finished_ = false;
};

}  // namespace fornace::server
