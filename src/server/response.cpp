// Response bodies and server-sent events of the completion endpoints.
#include "server/response.h"

#include <chrono>
#include <mutex>
#include <random>

namespace fornace::server {

using nlohmann::json;

ResponseIdentity new_identity(Endpoint endpoint, const std::string& model) {
  static std::mutex mutex;
  static std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string suffix(24, '0');
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (char& digit : suffix) digit = kDigits[generator() % (sizeof(kDigits) - 1)];
  }
  ResponseIdentity identity;
  identity.id = (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + suffix;
  identity.created = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  identity.model = model;
  return identity;
}

const char* api_finish_reason(FinishReason reason) {
  return reason == FinishReason::length ? "length" : "stop";
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

json envelope(Endpoint endpoint, const ResponseIdentity& identity, bool chunk) {
  const char* object = endpoint == Endpoint::chat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return {{"id", identity.id},
          {"object", object},
          {"created", identity.created},
          {"model", identity.model},
          {"system_fingerprint", nullptr}};
}

}  // namespace

json completion_json(Endpoint endpoint, const ResponseIdentity& identity, const std::string& text,
                     FinishReason reason, int64_t prompt_tokens, int64_t completion_tokens) {
  json response = envelope(endpoint, identity, false);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", api_finish_reason(reason)}};
  if (endpoint == Endpoint::chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
  } else {
    choice["text"] = text;
  }
  response["choices"] = json::array({choice});
  response["usage"] = usage_json(prompt_tokens, completion_tokens);
  return response;
}

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& value) { return "data: " + dump_json(value) + "\n\n"; }

SseStream::SseStream(Endpoint endpoint, ResponseIdentity identity, bool include_usage,
                     int64_t prompt_tokens)
    : endpoint_(endpoint),
      identity_(std::move(identity)),
      include_usage_(include_usage),
      prompt_tokens_(prompt_tokens) {}

json SseStream::chunk(const std::string& text, const char* finish_reason) {
  json value = envelope(endpoint_, identity_, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  if (endpoint_ == Endpoint::chat) {
    json delta = json::object();
    if (!role_sent_) {
      delta["role"] = "assistant";
      role_sent_ = true;
    }
    if (!text.empty() || finish_reason == nullptr) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  value["choices"] = json::array({choice});
  // With include_usage, OpenAI gives every chunk a null usage and the last one the counts.
  if (include_usage_) value["usage"] = nullptr;
  return value;
}

std::string SseStream::events(const CompletionUpdate& update) {
  if (finished_) return "";
  std::string out;
  if (!update.text.empty() || (!role_sent_ && endpoint_ == Endpoint::chat && !update.finished)) {
    out += sse_event(chunk(update.text, nullptr));
  }
  if (update.finished) {
    out += sse_event(chunk("", api_finish_reason(update.finish_reason)));
    if (include_usage_) {
      json usage = envelope(endpoint_, identity_, true);
      usage["choices"] = json::array();
      usage["usage"] = usage_json(prompt_tokens_, update.completion_tokens);
      out += sse_event(usage);
    }
    out += kSseDone;
    finished_ = true;
  }
  return out;
}

}  // namespace fornace::server
