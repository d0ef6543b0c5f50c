// Response shapes: chat.completion and text_completion objects, and the server-sent events of a
// stream (framing, the role delta, the finish chunk, the usage chunk, [DONE]).
#include "server/response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/source_paths.h"

namespace fornace::server {
namespace {

using nlohmann::json;

// The JSON of each "data: " event of `text`, with "[DONE]" as a string; every event must be
// one "data: " line followed by a blank line, or a comment.
std::vector<json> parse_events(const std::string& text) {
  std::vector<json> events;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << text.substr(at);
    if (end == std::string::npos) break;
    std::string event = text.substr(at, end - at);
    EXPECT_EQ(event.find('\n'), std::string::npos) << event;
    if (event.rfind(": ", 0) != 0) {
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      std::string data = event.substr(6);
      events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    }
    at = end + 2;
  }
  return events;
}

CompletionUpdate update(const std::string& text, int64_t tokens, bool finished = false,
                        FinishReason reason = FinishReason::length) {
  CompletionUpdate value;
  value.text = text;
  value.completion_tokens = tokens;
  value.finished = finished;
  value.finish_reason = reason;
  return value;
}

TEST(Identity, IdsCarryTheEndpointsPrefixAndDiffer) {
  ResponseIdentity chat = new_identity(Endpoint::chat, "m");
  ResponseIdentity text = new_identity(Endpoint::completions, "m");
  EXPECT_EQ(chat.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(text.id.rfind("cmpl-", 0), 0u);
  EXPECT_NE(new_identity(Endpoint::chat, "m").id, chat.id);
  EXPECT_GT(chat.created, 1700000000);
}

TEST(CompletionJson, ChatAndTextShapes) {
  ResponseIdentity identity{"chatcmpl-x", 123, "tiny"};
  json chat = completion_json(Endpoint::chat, identity, {{"Hello", FinishReason::stop, nullptr}},
                              {9, 2, 5});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["id"], "chatcmpl-x");
  EXPECT_EQ(chat["created"], 123);
  EXPECT_EQ(chat["model"], "tiny");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"],
            json({{"prompt_tokens", 9},
                  {"completion_tokens", 2},
                  {"total_tokens", 11},
                  {"prompt_tokens_details", {{"cached_tokens", 5}}}}));
  json text = completion_json(Endpoint::completions, identity,
                              {{"Hi", FinishReason::length, nullptr}}, {3, 4, 0});
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "Hi");
  EXPECT_EQ(text["choices"][0]["finish_reason"], "length");
  // A completion the server cancelled (shutdown) reads as "stop".
  EXPECT_STREQ(api_finish_reason(FinishReason::cancelled), "stop");
}

TEST(SseStream, ChatDeltasStartWithTheRoleAndEndWithDone) {
  SseStream stream(Endpoint::chat, {"chatcmpl-x", 1, "tiny"}, false, 5);
  std::string text = stream.events(CompletionUpdate{});
  text += stream.events(update("Hel", 1));
  text += stream.events(update("", 1));  // Nothing new: no event.
  text += stream.events(update("lo", 2, true, FinishReason::stop));
  EXPECT_TRUE(stream.finished());
  EXPECT_EQ(stream.events(update("", 2, true)), "");
  std::vector<json> events = parse_events(text);
  ASSERT_EQ(events.size(), 5u) << text;
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(events[1]["choices"][0]["delta"], json({{"content", "Hel"}}));
  EXPECT_EQ(events[2]["choices"][0]["delta"], json({{"content", "lo"}}));
  EXPECT_TRUE(events[2]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[3]["choices"][0]["delta"], json::object());
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(events[3].contains("usage"));
  EXPECT_EQ(events[4], "[DONE]");
  for (size_t index = 0; index < 4; ++index) EXPECT_EQ(events[index]["id"], "chatcmpl-x");
}

TEST(SseStream, UsageChunkComesLastWithEmptyChoices) {
  SseStream stream(Endpoint::completions, {"cmpl-x", 1, "tiny"}, true, 5);
  std::string text = stream.events(CompletionUpdate{});
  EXPECT_EQ(text, "");  // Text completions have no role delta.
  text += stream.events(update("Once", 1));
  text += stream.events(update(" upon", 3, true, FinishReason::length));
  std::vector<json> events = parse_events(text);
  ASSERT_EQ(events.size(), 5u) << text;
  EXPECT_EQ(events[0]["object"], "text_completion");
  EXPECT_EQ(events[0]["choices"][0]["text"], "Once");
  EXPECT_TRUE(events[0]["usage"].is_null());
  EXPECT_EQ(events[2]["choices"][0]["text"], "");
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[3]["choices"], json::array());
  EXPECT_EQ(events[3]["usage"],
            json({{"prompt_tokens", 5},
                  {"completion_tokens", 3},
                  {"total_tokens", 8},
                  {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(SseStream, AStreamEndedAtOnceStillSaysTheRole) {
  SseStream stream(Endpoint::chat, {"chatcmpl-x", 1, "tiny"}, false, 5);
  std::vector<json> events =
      parse_events(stream.events(update("", 0, true, FinishReason::cancelled)));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}}));
  EXPECT_EQ(events[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(SseStream, ChoicesStreamByIndexAndDoneComesAfterTheLast) {
  SseStream stream(Endpoint::chat, {"chatcmpl-x", 1, "tiny"}, true, 5, 2);
  std::string text = stream.events(CompletionUpdate{}, 0) + stream.events(CompletionUpdate{}, 1);
  text += stream.events(update("a", 1), 1);
  text += stream.events(update("b", 2, true, FinishReason::stop), 0);
  EXPECT_FALSE(stream.finished());
  CompletionUpdate last = update("", 3, true, FinishReason::length);
  last.cached_tokens = 4;
  text += stream.events(last, 1);
  EXPECT_TRUE(stream.finished());
  std::vector<json> events = parse_events(text);
  ASSERT_EQ(events.size(), 8u) << text;
  EXPECT_EQ(events[0]["choices"][0]["index"], 0);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["index"], 1);
  EXPECT_EQ(events[1]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[2]["choices"][0]["index"], 1);
  EXPECT_EQ(events[2]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(events[4]["choices"][0]["index"], 0);
  EXPECT_EQ(events[4]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(events[5]["choices"][0]["index"], 1);
  EXPECT_EQ(events[5]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[6]["usage"]["completion_tokens"], 5);
  EXPECT_EQ(events[6]["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(events[7], "[DONE]");
}

const Tokenizer& qwen_tokenizer() {
  static Tokenizer loaded = Tokenizer::load(fornace::test_paths::source("models"));
  return loaded;
}

TEST(LogprobsJson, ChatAndCompletionShapesCarryEachTokensTextBytesAndAlternatives) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  const uint32_t hello = *tokenizer.token_to_id("Hello");
  const uint32_t world = *tokenizer.token_to_id("Ġworld");
  std::vector<TokenLogprob> entries = {{hello, -0.5, {{hello, -0.5}, {world, -1.5}}},
                                       {world, -0.25, {{world, -0.25}, {hello, -2.0}}}};
  json chat = logprobs_json(Endpoint::chat, entries, tokenizer);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][1]["token"], " world");
  EXPECT_EQ(chat["content"][1]["logprob"], -0.25);
  EXPECT_EQ(chat["content"][1]["bytes"], json::array({32, 119, 111, 114, 108, 100}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], " world");
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["logprob"], -1.5);
  EXPECT_TRUE(chat["refusal"].is_null());

  json text = logprobs_json(Endpoint::completions, entries, tokenizer, 10);
  EXPECT_EQ(text["tokens"], json::array({"Hello", " world"}));
  EXPECT_EQ(text["token_logprobs"], json::array({-0.5, -0.25}));
  EXPECT_EQ(text["top_logprobs"][0], json({{"Hello", -0.5}, {" world", -1.5}}));
  EXPECT_EQ(text["text_offset"], json::array({10, 15}));
}

TEST(SseFraming, EventsAreOneDataLineAndABlankLine) {
  EXPECT_EQ(sse_event(json({{"a", "x\ny"}})), "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  // Bytes that are not UTF-8 become U+FFFD rather than an exception.
  EXPECT_EQ(dump_json(json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace fornace::server
