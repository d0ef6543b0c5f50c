// Request bodies of the completion endpoints: what parses into a CompletionRequest, and each kind
// of bad input as OpenAI's status, error type, param and code.
#include "server/request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/source_paths.h"
#include "server/api_error.h"

namespace fornace::server {
namespace {

using nlohmann::json;

const Tokenizer& tokenizer() {
  static Tokenizer loaded = Tokenizer::load(fornace::test_paths::source("models"));
  return loaded;
}

ServedModel served(int64_t context = 64) { return {"tiny", &tokenizer(), context, 151936}; }

ApiRequest chat(const json& body, int64_t context = 64) {
  return parse_request(Endpoint::chat, body.dump(), served(context));
}

ApiRequest completion(const json& body, int64_t context = 64) {
  return parse_request(Endpoint::completions, body.dump(), served(context));
}

json user_message(const json& content) {
  return json::array({{{"role", "user"}, {"content", content}}});
}

// The ApiError that parsing `body` throws.
ApiError error_of(Endpoint endpoint, const std::string& body, int64_t context = 64) {
  try {
    parse_request(endpoint, body, served(context));
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

void expect_error(Endpoint endpoint, const std::string& body, int status, const json& param,
                  const json& code) {
  ApiError error = error_of(endpoint, body);
  json object = error.body()["error"];
  EXPECT_EQ(error.status(), status) << body;
  EXPECT_EQ(object["type"], "invalid_request_error") << body;
  EXPECT_EQ(object["param"], param) << body;
  EXPECT_EQ(object["code"], code) << body;
  EXPECT_FALSE(object["message"].get<std::string>().empty()) << body;
}

TEST(ParseRequest, ChatMessagesRenderWithTheChatTemplate) {
  json messages = {{{"role", "system"}, {"content", "Be brief."}},
                   {{"role", "user"}, {"content", "Hello"}}};
  ApiRequest request = chat({{"messages", messages}, {"model", "tiny"}});
  std::string expected =
      tokenizer().apply_chat_template({{"system", "Be brief."}, {"user", "Hello"}}, true);
  EXPECT_EQ(request.completion.prompt, tokenizer().encode(expected));
  EXPECT_EQ(request.endpoint, Endpoint::chat);
  EXPECT_FALSE(request.stream);
}

TEST(ParseRequest, ContentPartsJoinAndDeveloperIsSystem) {
  ApiRequest parts =
      chat({{"messages", user_message(json::array({{{"type", "text"}, {"text", "Hel"}},
                                                   {{"type", "text"}, {"text", "lo"}}}))}});
  ApiRequest plain = chat({{"messages", user_message("Hello")}});
  EXPECT_EQ(parts.completion.prompt, plain.completion.prompt);
  ApiRequest developer =
      chat({{"messages",
             {{{"role", "developer"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}});
  ApiRequest system =
      chat({{"messages",
             {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}});
  EXPECT_EQ(developer.completion.prompt, system.completion.prompt);
}

TEST(ParseRequest, ServerDefaultsAreOpenAIsAndMaxTokensFillsTheContext) {
  ApiRequest request = completion({{"prompt", "Once upon a time"}});
  const SamplerOptions& sampling = request.completion.sampling;
  EXPECT_EQ(sampling.temperature, 1.0);
  EXPECT_EQ(sampling.top_p, 1.0);
  EXPECT_EQ(sampling.repeat_penalty, 1.0);
  EXPECT_EQ(sampling.frequency_penalty, 0.0);
  EXPECT_FALSE(request.seeded);
  EXPECT_EQ(request.completion.max_tokens,
            64 - static_cast<int64_t>(request.completion.prompt.size()));
  // A larger max_tokens is cut to the room the context leaves.
  EXPECT_EQ(
      completion({{"prompt", "Once upon a time"}, {"max_tokens", 1000000}}).completion.max_tokens,
      request.completion.max_tokens);
}

TEST(ParseRequest, ParametersReachTheCompletionRequest) {
  ApiRequest request = chat({{"messages", user_message("Hi")},
                             {"max_completion_tokens", 7},
                             {"max_tokens", 99},
                             {"temperature", 0},
                             {"top_p", 0.5},
                             {"seed", 42},
                             {"stop", "\n"},
                             {"frequency_penalty", 1.5},
                             {"presence_penalty", -0.5},
                             {"repeat_penalty", 1.2},
                             {"n", 1},
                             {"stream", true},
                             {"stream_options", {{"include_usage", true}}}});
  const CompletionRequest& completion_request = request.completion;
  EXPECT_EQ(completion_request.max_tokens, 7);  // max_completion_tokens over max_tokens
  EXPECT_EQ(completion_request.sampling.temperature, 0.0);
  EXPECT_EQ(completion_request.sampling.top_p, 0.5);
  EXPECT_EQ(completion_request.sampling.seed, 42u);
  EXPECT_TRUE(request.seeded);
  EXPECT_EQ(completion_request.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(completion_request.sampling.frequency_penalty, 1.5);
  EXPECT_EQ(completion_request.sampling.presence_penalty, -0.5);
  EXPECT_EQ(completion_request.sampling.repeat_penalty, 1.2);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  // null is "not given".
  ApiRequest nulls = completion({{"prompt", "x"},
                                 {"temperature", nullptr},
                                 {"stop", nullptr},
                                 {"max_tokens", nullptr},
                                 {"model", nullptr}});
  EXPECT_EQ(nulls.completion.sampling.temperature, 1.0);
  EXPECT_TRUE(nulls.completion.stop.empty());
}

TEST(ParseRequest, PromptsAsTextOneTextOrTokenIds) {
  std::vector<uint32_t> ids = tokenizer().encode("Once upon a time");
  EXPECT_EQ(completion({{"prompt", "Once upon a time"}}).completion.prompt, ids);
  EXPECT_EQ(completion({{"prompt", {"Once upon a time"}}}).completion.prompt, ids);
  EXPECT_EQ(completion({{"prompt", ids}}).completion.prompt, ids);
  EXPECT_EQ(completion({{"prompt", json::array({ids})}}).completion.prompt, ids);
  EXPECT_EQ(completion({{"prompt", "x"}, {"stop", {"a", "b", "c", "d"}}}).completion.stop.size(),
            4u);
}

TEST(ParseRequest, MalformedBodiesAre400) {
  expect_error(Endpoint::chat, "{\"messages\": [", 400, nullptr, "invalid_json");
  expect_error(Endpoint::chat, "", 400, nullptr, "invalid_json");
  expect_error(Endpoint::chat, "[1, 2]", 400, nullptr, "invalid_json");
  expect_error(Endpoint::completions, "\"text\"", 400, nullptr, "invalid_json");
  expect_error(Endpoint::chat, "{\"messages\": \"\xff\"}", 400, nullptr, "invalid_json");
}

TEST(ParseRequest, WrongTypesAre400NamingTheParam) {
  const std::string messages = "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]";
  struct Case {
    std::string field;
    const char* param;
  };
  for (const Case& item : std::vector<Case>{{"\"max_tokens\": \"5\"", "max_tokens"},
                                            {"\"max_tokens\": 5.5", "max_tokens"},
                                            {"\"temperature\": \"hot\"", "temperature"},
                                            {"\"top_p\": [1]", "top_p"},
                                            {"\"seed\": 1.5", "seed"},
                                            {"\"stream\": 1", "stream"},
                                            {"\"stop\": 5", "stop"},
                                            {"\"stop\": [\"a\", 5]", "stop[1]"},
                                            {"\"model\": 5", "model"},
                                            {"\"stream_options\": true", "stream_options"},
                                            {"\"presence_penalty\": {}", "presence_penalty"}}) {
    expect_error(Endpoint::chat, "{" + messages + ", " + item.field + "}", 400, item.param,
                 "invalid_type");
  }
  expect_error(Endpoint::chat, R"({"messages": {"role": "user"}})", 400, "messages",
               "invalid_type");
  expect_error(Endpoint::chat, R"({"messages": ["hi"]})", 400, "messages[0]", "invalid_type");
  expect_error(Endpoint::chat, R"({"messages": [{"role": "user", "content": 5}]})", 400,
               "messages[0].content", "invalid_type");
  expect_error(Endpoint::chat, R"({"messages": [{"role": 1, "content": "x"}]})", 400,
               "messages[0].role", "invalid_type");
  expect_error(Endpoint::completions, R"({"prompt": 5})", 400, "prompt", "invalid_type");
  expect_error(Endpoint::completions, R"({"prompt": [1, "a"]})", 400, "prompt[1]", "invalid_type");
}

TEST(ParseRequest, ValuesOutOfRangeAre400) {
  const std::string chat_head = R"({"messages": [{"role": "user", "content": "Hi"}], )";
  struct Case {
    std::string field;
    const char* param;
  };
  for (const Case& item :
       std::vector<Case>{{"\"max_tokens\": 0", "max_tokens"},
                         {"\"max_tokens\": -3", "max_tokens"},
                         {"\"max_completion_tokens\": 0", "max_completion_tokens"},
                         {"\"temperature\": 2.5", "temperature"},
                         {"\"temperature\": -0.1", "temperature"},
                         {"\"top_p\": 0", "top_p"},
                         {"\"top_p\": 1.01", "top_p"},
                         {"\"frequency_penalty\": 2.1", "frequency_penalty"},
                         {"\"presence_penalty\": -3", "presence_penalty"},
                         {"\"repeat_penalty\": 0", "repeat_penalty"},
                         {"\"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]", "stop"}}) {
    expect_error(Endpoint::chat, chat_head + item.field + "}", 400, item.param, "invalid_value");
  }
  expect_error(Endpoint::completions, R"({"prompt": [1, 151936]})", 400, "prompt[1]",
               "invalid_value");
  expect_error(Endpoint::completions, R"({"prompt": [-1]})", 400, "prompt[0]", "invalid_value");
  expect_error(Endpoint::chat, chat_head + R"("stream_options": {"include_usage": true}})", 400,
               "stream_options", "invalid_value");
}

TEST(ParseRequest, EmptyOrUnknownMessagesAre400) {
  expect_error(Endpoint::chat, R"({"messages": []})", 400, "messages", "empty_array");
  expect_error(Endpoint::chat, R"({"model": "tiny"})", 400, "messages",
               "missing_required_parameter");
  expect_error(Endpoint::chat, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400,
               "messages[0].role", "invalid_value");
  expect_error(Endpoint::chat, R"({"messages": [{"content": "x"}]})", 400, "messages[0].role",
               "missing_required_parameter");
  expect_error(Endpoint::chat, R"({"messages": [{"role": "user"}]})", 400, "messages[0].content",
               "missing_required_parameter");
  expect_error(
      Endpoint::chat,
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
      400, "messages[0].content[0].type", "unsupported_parameter");
  expect_error(Endpoint::completions, R"({"prompt": []})", 400, "prompt", "empty_array");
  expect_error(Endpoint::completions, R"({"max_tokens": 3})", 400, "prompt",
               "missing_required_parameter");
  expect_error(Endpoint::completions, R"({"prompt": ""})", 400, "prompt", "invalid_value");
}

TEST(ParseRequest, UnsupportedFeaturesAre400) {
  const std::string chat_head = R"({"messages": [{"role": "user", "content": "Hi"}], )";
  expect_error(Endpoint::chat, chat_head + R"("n": 0})", 400, "n", "invalid_value");
  expect_error(Endpoint::chat, chat_head + R"("tools": [{"type": "function"}]})", 400,
               "tools[0].function", "missing_required_parameter");
  expect_error(Endpoint::completions, R"({"prompt": ["a", "b"]})", 400, "prompt",
               "unsupported_parameter");
  expect_error(Endpoint::completions, R"({"prompt": "a", "echo": true})", 400, "echo",
               "unsupported_parameter");
}

TEST(ParseRequest, LogprobsAskForTheTopTokensWithinOpenAIsBounds) {
  const std::string chat_head = R"({"messages": [{"role": "user", "content": "Hi"}], )";
  const json messages = user_message("Hi");
  EXPECT_EQ(chat({{"messages", messages}, {"logprobs", false}}).completion.top_logprobs, -1);
  EXPECT_EQ(chat({{"messages", messages}, {"logprobs", true}}).completion.top_logprobs, 0);
  EXPECT_EQ(chat({{"messages", messages}, {"logprobs", true}, {"top_logprobs", 20}})
                .completion.top_logprobs,
            20);
  EXPECT_EQ(completion({{"prompt", "a"}, {"logprobs", 5}}).completion.top_logprobs, 5);
  EXPECT_EQ(completion({{"prompt", "a"}, {"logprobs", nullptr}}).completion.top_logprobs, -1);
  EXPECT_EQ(chat({{"messages", messages}, {"n", 3}}).choices, 3);
  expect_error(Endpoint::chat, chat_head + R"("top_logprobs": 2})", 400, "top_logprobs",
               "invalid_value");
  expect_error(Endpoint::chat, chat_head + R"("logprobs": true, "top_logprobs": 21})", 400,
               "top_logprobs", "invalid_value");
  expect_error(Endpoint::chat, chat_head + R"("logprobs": 1})", 400, "logprobs",
               "invalid_type");
  expect_error(Endpoint::completions, R"({"prompt": "a", "logprobs": 6})", 400, "logprobs",
               "invalid_value");
  expect_error(Endpoint::completions, R"({"prompt": "a", "logprobs": true})", 400, "logprobs",
               "invalid_type");
}

TEST(ParseRequest, AnotherModelIs404ModelNotFound) {
  expect_error(Endpoint::chat,
               R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})", 404,
               "model", "model_not_found");
  expect_error(Endpoint::completions, R"({"model": "other", "prompt": "x"})", 404, "model",
               "model_not_found");
}

TEST(ParseRequest, APromptThatFillsTheContextIs400ContextLengthExceeded) {
  std::vector<uint32_t> ids(64, 100);
  expect_error(Endpoint::completions, json({{"prompt", ids}}).dump(), 400, "prompt",
               "context_length_exceeded");
  ids.pop_back();  // Room for one token.
  EXPECT_EQ(completion({{"prompt", ids}}).completion.max_tokens, 1);
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  expect_error(Endpoint::chat, json({{"messages", user_message(long_text)}}).dump(), 400,
               "messages", "context_length_exceeded");
}

}  // namespace
}  // namespace fornace::server
