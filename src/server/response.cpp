// Response bodies and server-sent events of the completion endpoints.
#include "server/response.h"

#include <algorithm>
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

const char* api_finish_reason(FinishReason reason, bool called_tools) {
  return called_tools && reason != FinishReason::length ? "tool_calls" : api_finish_reason(reason);
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
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

// A token as OpenAI's logprobs give it: its text and its UTF-8 bytes.
json token_json(const Tokenizer& tokenizer, uint32_t id, double logprob) {
  const std::string text = tokenizer.token_bytes(id);
  json bytes = json::array();
  for (unsigned char byte : text) bytes.push_back(byte);
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

}  // namespace

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& entries,
                   const Tokenizer& tokenizer, int64_t text_offset) {
  if (endpoint == Endpoint::chat) {
    json content = json::array();
    for (const TokenLogprob& entry : entries) {
      json token = token_json(tokenizer, entry.id, entry.logprob);
      token["top_logprobs"] = json::array();
      for (const auto& [id, logprob] : entry.top) {
        token["top_logprobs"].push_back(token_json(tokenizer, id, logprob));
      }
      content.push_back(std::move(token));
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& entry : entries) {
    const std::string text = tokenizer.token_bytes(entry.id);
    tokens.push_back(text);
    token_logprobs.push_back(entry.logprob);
    json alternatives = json::object();
    for (const auto& [id, logprob] : entry.top) alternatives[tokenizer.token_bytes(id)] = logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json completion_json(Endpoint endpoint, const ResponseIdentity& identity,
                     const std::vector<Choice>& choices, const Usage& usage) {
  json response = envelope(endpoint, identity, false);
  response["choices"] = json::array();
  for (size_t index = 0; index < choices.size(); ++index) {
    const Choice& choice = choices[index];
    const bool called = !choice.tool_calls.empty();
    json object = {{"index", index},
                   {"logprobs", choice.logprobs},
                   {"finish_reason", api_finish_reason(choice.finish_reason, called)}};
    if (endpoint == Endpoint::chat) {
      object["message"] = {{"role", "assistant"},
                           {"content", called && choice.text.empty() ? json() : json(choice.text)},
                           {"refusal", nullptr}};
      if (called) {
        json calls = json::array();
        for (const text::ToolCall& call : choice.tool_calls) {
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        object["message"]["tool_calls"] = std::move(calls);
      }
    } else {
      object["text"] = choice.text;
    }
    response["choices"].push_back(std::move(object));
  }
  response["usage"] = usage_json(usage);
  return response;
}

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& value) { return "data: " + dump_json(value) + "\n\n"; }

SseStream::SseStream(Endpoint endpoint, ResponseIdentity identity, bool include_usage,
                     int64_t prompt_tokens, int64_t choices)
    : endpoint_(endpoint),
      identity_(std::move(identity)),
      include_usage_(include_usage),
      choices_(static_cast<size_t>(choices)) {
  usage_.prompt_tokens = prompt_tokens;
}

json SseStream::chunk(int64_t index, const std::string& text, const char* finish_reason,
                      const json& logprobs, const std::vector<text::ToolCallDelta>& calls) {
  json value = envelope(endpoint_, identity_, true);
  json choice = {{"index", index}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  if (endpoint_ == Endpoint::chat) {
    json delta = json::object();
    ChoiceState& state = choices_[static_cast<size_t>(index)];
    if (!state.role_sent) {
      delta["role"] = "assistant";
      state.role_sent = true;
    }
    if (!text.empty() || (finish_reason == nullptr && calls.empty())) delta["content"] = text;
    for (const text::ToolCallDelta& call : calls) {
      json piece = {{"index", call.index}};
      json function = {{"arguments", call.arguments}};
      if (!call.id.empty()) {
        piece["id"] = call.id;
        piece["type"] = "function";
        function["name"] = call.name;
      }
      piece["function"] = std::move(function);
      delta["tool_calls"].push_back(std::move(piece));
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  value["choices"] = json::array({choice});
  // With include_usage, OpenAI gives every chunk a null usage and the last one the counts.
  if (include_usage_) value["usage"] = nullptr;
  return value;
}

std::string SseStream::events(const CompletionUpdate& update, int64_t index, const json& logprobs,
                              const std::vector<text::ToolCallDelta>& calls) {
  ChoiceState& state = choices_.at(static_cast<size_t>(index));
  if (state.finished) return "";
  std::string out;
  const bool has_logprobs = !logprobs.is_null() && (logprobs.contains("content")
                                                        ? !logprobs["content"].empty()
                                                        : !logprobs["tokens"].empty());
  if (!calls.empty()) state.called_tools = true;
  if (!update.text.empty() || has_logprobs || !calls.empty() ||
      (!state.role_sent && endpoint_ == Endpoint::chat && !update.finished)) {
    out += sse_event(chunk(index, update.text, nullptr, logprobs, calls));
  }
  if (update.finished) {
    out += sse_event(
        chunk(index, "", api_finish_reason(update.finish_reason, state.called_tools), nullptr));
    state.finished = true;
    usage_.completion_tokens += update.completion_tokens;
    usage_.cached_tokens += update.cached_tokens;
  }
  if (update.finished &&
      std::all_of(choices_.begin(), choices_.end(), [](const auto& c) { return c.finished; })) {
    if (include_usage_) {
      json usage = envelope(endpoint_, identity_, true);
      usage["choices"] = json::array();
      usage["usage"] = usage_json(usage_);
      out += sse_event(usage);
    }
    out += kSseDone;
    finished_ = true;
  }
  return out;
}

}  // namespace fornace::server
