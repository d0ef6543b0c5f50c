// The chat-template interpreter: byte-for-byte equality with Jinja2 (tests/reference/
// render_chat_template.py) on each family's real template, hand-reasoned small templates, errors
// and hostile templates.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "core/error.h"
#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using text::ChatTemplate;
using text::ChatTemplateLimits;
using text::TemplateValue;
using text::TokenizerConfig;
using Json = nlohmann::ordered_json;  // Key order shows in what tojson prints.

// Renders `source` with the globals given as a JSON object.
std::string render(const std::string& source, const std::string& variables_json = "{}",
                   const ChatTemplateLimits& limits = ChatTemplateLimits()) {
  return ChatTemplate(source).render(TemplateValue::from_json(variables_json).as_dict(), limits);
}

// The message of the Error that parsing or rendering `source` throws, or "" when none.
std::string render_error(const std::string& source, const std::string& variables_json = "{}",
                         const ChatTemplateLimits& limits = ChatTemplateLimits()) {
  try {
    render(source, variables_json, limits);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One conversation to render: the messages (JSON), the generation prompt, extra globals (JSON)
// and the tools (JSON; empty: None).
struct ChatCase {
  std::string name;
  std::string messages;
  bool add_generation_prompt;
  std::string variables = "{}";
  std::string tools = "";
};

// System, multi-turn and generation-prompt cases, and content that tests the bytes.
const std::vector<ChatCase>& chat_cases() {
  static const std::vector<ChatCase> cases = {
      {"system_user_prompt",
       R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])", true},
      {"system_user_no_prompt",
       R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])", false},
      {"user_only_prompt", R"([{"role": "user", "content": "Why is the sky blue?"}])", true},
      {"user_only_no_prompt", R"([{"role": "user", "content": "Why is the sky blue?"}])", false},
      {"multi_turn_prompt",
       R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
           {"role": "user", "content": "Tell me a joke."}])",
       true},
      {"system_multi_turn_prompt",
       R"([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"},
           {"role": "assistant", "content": "4"}, {"role": "user", "content": "3+3?"}])",
       true},
      {"ends_with_assistant",
       R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
           {"role": "assistant", "content": "A"}])",
       false},
      {"unicode_newlines_spaces",
       R"([{"role": "system", "content": "  Réponds en français.\n\tMerci  "},
           {"role": "user", "content": "\u00a0 你好，世界 👋🏽\ne\u0301 \"quotes\" 'single' back\\slash {{ x }} {% if %}\n\n"},
           {"role": "assistant", "content": " \u3000答え\u3000 \r\n"},
           {"role": "user", "content": "trailing\n"}])",
       true},
      {"empty_content", R"([{"role": "user", "content": ""}])", true},
      {"system_only", R"([{"role": "system", "content": "Only a system prompt."}])", true},
      {"think_in_earlier_turn",
       R"([{"role": "user", "content": "Q1"},
           {"role": "assistant", "content": "<think>\nI reason.\n</think>\n\nThe answer."},
           {"role": "user", "content": "Q2"}])",
       true},
      {"think_in_last_turn",
       R"([{"role": "user", "content": "Q1"},
           {"role": "assistant", "content": "<think>\nStep one.\nStep two.\n</think>\n\nDone."}])",
       false},
      {"thinking_disabled", R"([{"role": "user", "content": "Quick one."}])", true,
       R"({"enable_thinking": false})"},
      {"thinking_enabled", R"([{"role": "user", "content": "Slow one."}])", true,
       R"({"enable_thinking": true})"},
      {"roles_do_not_alternate",
       R"([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])", true},
  };
  return cases;
}

// Jinja2's rendering of each case: the text, or the error message prefixed with "error: ".
std::vector<std::string> jinja_renderings(const std::string& template_path,
                                          const std::vector<ChatCase>& cases) {
  Json request = Json::array();
  for (const ChatCase& chat_case : cases) {
    request.push_back({{"messages", Json::parse(chat_case.messages)},
                       {"add_generation_prompt", chat_case.add_generation_prompt},
                       {"variables", Json::parse(chat_case.variables)}});
    if (!chat_case.tools.empty()) request.back()["tools"] = Json::parse(chat_case.tools);
  }
  std::string cases_path =
      fornace::test_paths::build("chat-cases-") + std::to_string(::getpid()) + ".json";
  std::ofstream(cases_path, std::ios::binary) << request.dump();
  Outcome outcome =
      run_shell_capturing(fornace::test_paths::python() + " " + fornace::test_paths::source() +
                          "/tests/reference/render_chat_template.py " + template_path + " " +
                          cases_path + " >{out} 2>{err}");
  std::remove(cases_path.c_str());
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  std::vector<std::string> renderings;
  if (outcome.exit_code != 0) return renderings;
  for (const Json& result : Json::parse(outcome.out)) {
    renderings.push_back(result.contains("text") ? result["text"].get<std::string>()
                                                 : "error: " + result["error"].get<std::string>());
  }
  EXPECT_EQ(renderings.size(), cases.size());
  return renderings;
}

std::string family_config_path(const std::string& family) {
  return testing::source_path("models/tokenizers/" + family + "/tokenizer_config.json");
}

class FamilyTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyTemplate, RendersEveryCaseByteForByteAsJinja2Does) {
  std::string config_path = family_config_path(GetParam());
  std::string config_text = testing::read_test_file(config_path);
  ASSERT_FALSE(config_text.empty()) << "run scripts/get-tokenizer.sh";
  TokenizerConfig config = text::read_tokenizer_config(config_text, config_path);
  ASSERT_TRUE(config.chat_template.has_value()) << config_path;
  ChatTemplate chat_template(*config.chat_template);
  std::vector<std::string> expected = jinja_renderings(config_path, chat_cases());
  ASSERT_EQ(expected.size(), chat_cases().size());
  size_t rendered = 0;
  for (size_t index = 0; index < expected.size(); ++index) {
    const ChatCase& chat_case = chat_cases()[index];
    TemplateValue::Dict variables = text::chat_template_variables(
        config, TemplateValue::from_json(chat_case.messages), chat_case.add_generation_prompt);
    TemplateValue extra = TemplateValue::from_json(chat_case.variables);
    for (const auto& member : extra.as_dict()) variables.push_back(member);
    if (expected[index].rfind("error: ", 0) == 0) {
      std::string message = expected[index].substr(7);
      try {
        chat_template.render(variables);
        ADD_FAILURE() << chat_case.name << ": Jinja2 raised '" << message << "', Fornace did not";
      } catch (const Error& error) {
        EXPECT_TRUE(contains(error.what(), message)) << chat_case.name << ": " << error.what();
      }
      continue;
    }
    EXPECT_EQ(chat_template.render(variables), expected[index]) << chat_case.name;
    ++rendered;
  }
  // Only Gemma 3 refuses a conversation (the one whose roles do not alternate).
  EXPECT_GE(rendered, chat_cases().size() - 1);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTemplate,
                         ::testing::Values("qwen2_5", "qwen3", "llama3", "llama3_1", "gemma3"));

// ---- Tools, tool calls and tool results ------------------------------------------------------

// Two OpenAI function definitions, the second with nested and non-ASCII schema text.
const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather",
   "description": "Current weather for a city.",
   "parameters": {"type": "object", "properties": {"city": {"type": "string",
     "description": "City name, e.g. Zürich"}, "unit": {"type": "string",
     "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "description": "Adds two numbers.",
   "parameters": {"type": "object", "properties": {"a": {"type": "number"},
     "b": {"type": "number"}}, "required": ["a", "b"]}}}])";

// A weather call and its result, in the forms clients send: arguments as an object (as
// transformers' examples pass them) or as a JSON string (as OpenAI clients send them); content
// null, absent or text beside the calls; one call and several; calls without the "function"
// wrapper.
const std::vector<ChatCase>& tool_cases() {
  static const std::vector<ChatCase> cases = {
      {.name = "tools_system_user",
       .messages = R"([{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "Weather in Paris?"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "tools_user_only",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "tools_empty_list",
       .messages = R"([{"role": "user", "content": "Hi"}])",
       .add_generation_prompt = true,
       .tools = "[]"},
      {.name = "one_call_object_arguments_empty_content",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
         {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
          "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "one_call_string_arguments_null_content",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "21 C, clear"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "one_call_string_arguments_empty_content",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "21 C, clear"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "one_call_content_absent",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "tool_calls": [{"type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
         {"role": "tool", "name": "get_weather", "content": "21 C"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "several_calls_results_and_answer",
       .messages = R"([{"role": "system", "content": "Use the tools."},
         {"role": "user", "content": "Weather in Paris and Oslo, and 2 + 2.5?"},
         {"role": "assistant", "content": "Let me check.", "tool_calls": [
           {"id": "a", "type": "function", "function": {"name": "get_weather",
            "arguments": {"city": "Paris"}}},
           {"id": "b", "type": "function", "function": {"name": "get_weather",
            "arguments": "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}},
           {"id": "c", "type": "function", "function": {"name": "add",
            "arguments": {"a": 2, "b": 2.5}}}]},
         {"role": "tool", "tool_call_id": "a", "content": "21 C"},
         {"role": "tool", "tool_call_id": "b", "content": "-3 C, snow ❄"},
         {"role": "tool", "tool_call_id": "c", "content": "4.5"},
         {"role": "assistant", "content": "Paris 21 C, Oslo -3 C; 4.5."},
         {"role": "user", "content": "Thanks!"}])",
       .add_generation_prompt = true,
       .tools = kTools},
      {.name = "calls_without_function_wrapper",
       .messages = R"([{"role": "user", "content": "2 + 3?"},
         {"role": "assistant", "content": "", "tool_calls": [
           {"name": "add", "arguments": {"a": 2, "b": 3}}]},
         {"role": "tool", "content": "5"}])",
       .add_generation_prompt = false,
       .tools = kTools},
      {.name = "reasoning_before_call",
       .messages = R"([{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "<think>\nI should call the tool.\n</think>\n\n",
          "tool_calls": [{"type": "function", "function": {"name": "get_weather",
          "arguments": {"city": "Paris"}}}]},
         {"role": "tool", "content": "21 C"}])",
       .add_generation_prompt = true,
       .variables = R"({"enable_thinking": false})",
       .tools = kTools},
      {.name = "tool_result_without_tools_list",
       .messages = R"([{"role": "user", "content": "2 + 3?"},
         {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
          "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
         {"role": "tool", "content": "5"}, {"role": "assistant", "content": "5."}])",
       .add_generation_prompt = false},
  };
  return cases;
}

// Each family's template through Tokenizer::apply_chat_template_json, against Jinja2 given the
// same messages and tools. Qwen2.5 and Qwen3 show tools, calls and results; the Llama 3 and
// 3.1 templates here ignore tools and print each message's role and trimmed content (null as
// "None"); Gemma 3's ignores tools and raises on a tool role or null content, as Jinja2 does.
class FamilyToolTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyToolTemplate, RendersToolsCallsAndResultsByteForByteAsJinja2Does) {
  Tokenizer tokenizer = Tokenizer::load(testing::source_path("models/tokenizers/" + GetParam()));
  std::vector<std::string> expected =
      jinja_renderings(family_config_path(GetParam()), tool_cases());
  ASSERT_EQ(expected.size(), tool_cases().size());
  size_t rendered = 0;
  for (size_t index = 0; index < expected.size(); ++index) {
    const ChatCase& chat_case = tool_cases()[index];
    std::optional<bool> enable_thinking;
    if (chat_case.variables != "{}") enable_thinking = false;
    auto apply = [&] {
      return tokenizer.apply_chat_template_json(chat_case.messages, chat_case.tools,
                                                chat_case.add_generation_prompt, enable_thinking);
    };
    if (expected[index].rfind("error: ", 0) == 0) {
      std::string message = expected[index].substr(7);
      try {
        apply();
        ADD_FAILURE() << chat_case.name << ": Jinja2 raised '" << message << "', Fornace did not";
      } catch (const Error& error) {
        EXPECT_TRUE(contains(error.what(), message)) << chat_case.name << ": " << error.what();
      }
      continue;
    }
    EXPECT_EQ(apply(), expected[index]) << chat_case.name;
    ++rendered;
  }
  // Which cases each family's template renders (the rest raise in Jinja2 as in Fornace):
  // Qwen3's reads `'</think>' in message.content`, which raises on a null content and on an
  // absent one ('+' with Undefined); Gemma 3's refuses a tool role and null content.
  std::map<std::string, size_t> renders = {{"qwen2_5", tool_cases().size()},
                                           {"qwen3", tool_cases().size() - 2},
                                           {"llama3", tool_cases().size()},
                                           {"llama3_1", tool_cases().size()},
                                           {"gemma3", 3}};
  EXPECT_EQ(rendered, renders.at(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyToolTemplate,
                         ::testing::Values("qwen2_5", "qwen3", "llama3", "llama3_1", "gemma3"));

TEST(ChatTemplateTools, Qwen25ShowsToolsAndCallsInItsOwnForm) {
  // The facts the goldens above rest on, read off Qwen2.5's template: tools as tojson lines in
  // <tools>, a call's object arguments as JSON, a string's as a JSON string.
  Tokenizer tokenizer = Tokenizer::load(testing::source_path("models/tokenizers/qwen2_5"));
  std::string prompt = tokenizer.apply_chat_template_json(tool_cases()[7].messages, kTools, true);
  EXPECT_TRUE(contains(prompt,
                       "<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                       "\"get_weather\", \"description\": \"Current weather for a city.\""));
  EXPECT_TRUE(contains(prompt, "Zürich"));
  EXPECT_TRUE(contains(prompt,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(contains(prompt, "\"arguments\": \"{\\\"city\\\": \\\"Oslo\\\""));
  EXPECT_TRUE(contains(prompt,
                       "<|im_start|>user\n<tool_response>\n21 C\n</tool_response>\n"
                       "<tool_response>\n-3 C, snow ❄\n</tool_response>\n"
                       "<tool_response>\n4.5\n</tool_response><|im_end|>\n"));
}

TEST(ChatTemplateTools, BadMessagesAndToolsNameTheParameter) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  auto message_of = [&](std::string_view messages, std::string_view tools) {
    try {
      tokenizer.apply_chat_template_json(messages, tools, true);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(message_of("[{", ""), "messages: not valid JSON"));
  EXPECT_TRUE(contains(message_of(R"({"role": "user"})", ""), "messages: expected an array"));
  EXPECT_TRUE(contains(message_of(R"([{"role": "user", "content": "x"}, 3])", ""),
                       "messages[1]: expected an object"));
  EXPECT_TRUE(
      contains(message_of(R"([{"role": "narrator", "content": "x"}])", ""), "messages[0].role"));
  EXPECT_TRUE(contains(message_of(R"([{"content": "x"}])", ""), "messages[0].role"));
  EXPECT_TRUE(
      contains(message_of(R"([{"role": "user", "content": "x"}])", "{"), "tools: not valid JSON"));
  EXPECT_TRUE(contains(message_of(R"([{"role": "user", "content": "x"}])", "{}"),
                       "tools: expected an array"));
  EXPECT_TRUE(contains(message_of(R"([{"role": "user", "content": "x"}])", "[1]"),
                       "tools[0]: expected an object"));
}

TEST(ChatTemplateTools, TheJsonFormEqualsTheMessageFormWithoutTools) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  const char* messages =
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])";
  std::string expected =
      tokenizer.apply_chat_template({{"system", "S"}, {"user", "Hi"}}, true, false);
  EXPECT_EQ(tokenizer.apply_chat_template_json(messages, "", true, false), expected);
  EXPECT_EQ(tokenizer.apply_chat_template_json(messages, "null", true, false), expected);
}

TEST(ChatTemplateTools, ChatMlWithoutATemplateRefusesToolsAndCalls) {
  Tokenizer tokenizer = Tokenizer::from_json(
      testing::read_test_file(testing::source_path("models/tokenizers/qwen2_5/tokenizer.json")),
      "tokenizer.json");
  EXPECT_EQ(tokenizer.apply_chat_template_json(R"([{"role": "user", "content": "Hi"}])", "", true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(
      tokenizer.apply_chat_template_json(R"([{"role": "user", "content": "Hi"}])", kTools, true),
      Error);
  EXPECT_THROW(tokenizer.apply_chat_template_json(tool_cases()[3].messages, "", true), Error);
}

TEST(ChatTemplateTokenizer, AppliesTheCheckpointTemplateWithQwen25DefaultSystemPrompt) {
  Tokenizer tokenizer = Tokenizer::load(testing::source_path("models/tokenizers/qwen2_5"));
  std::vector<ChatCase> cases = {
      {"user", R"([{"role": "user", "content": "Hi"}])", true},
      {"system",
       R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])", true}};
  std::vector<std::string> expected = jinja_renderings(family_config_path("qwen2_5"), cases);
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_TRUE(contains(expected[0], "You are Qwen, created by Alibaba Cloud."));
  EXPECT_EQ(tokenizer.apply_chat_template({{"user", "Hi"}}, true), expected[0]);
  EXPECT_EQ(tokenizer.apply_chat_template({{"system", "Be brief."}, {"user", "Hi"}}, true),
            expected[1]);
}

TEST(ChatTemplateTokenizer, PassesEnableThinkingToQwen3) {
  Tokenizer tokenizer = Tokenizer::load(testing::source_path("models/tokenizers/qwen3"));
  std::vector<ChatCase> cases = {
      {"off", R"([{"role": "user", "content": "Hi"}])", true, R"({"enable_thinking": false})"}};
  std::vector<std::string> expected = jinja_renderings(family_config_path("qwen3"), cases);
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_TRUE(contains(expected[0], "<think>\n\n</think>"));
  EXPECT_EQ(tokenizer.apply_chat_template({{"user", "Hi"}}, true, false), expected[0]);
}

TEST(ChatTemplateTokenizer, WithoutTemplateOrChatMlTokensTheErrorNamesPrompt) {
  std::string directory = fornace::test_paths::build("chat-no-template");
  std::filesystem::create_directories(directory);
  std::filesystem::copy_file(testing::source_path("models/tokenizers/llama3/tokenizer.json"),
                             directory + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(directory + "/tokenizer_config.json") << R"({"eos_token": "<|end_of_text|>"})";
  Tokenizer tokenizer = Tokenizer::load(directory);
  try {
    tokenizer.apply_chat_template({{"user", "x"}}, true);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_TRUE(contains(error.what(), "--prompt")) << error.what();
  }
  std::filesystem::remove_all(directory);
}

TEST(ChatTemplateConfigFile, ReadsTemplateListsAndTokenObjects) {
  TokenizerConfig config = text::read_tokenizer_config(
      R"({"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
          "eos_token": null, "model_max_length": 1e30,
          "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})",
      "tokenizer_config.json");
  EXPECT_EQ(config.chat_template, "D");
  EXPECT_EQ(config.bos_token, "<s>");
  EXPECT_FALSE(config.eos_token.has_value());
}

// ---- Hand-reasoned small templates ----------------------------------------------------------

TEST(ChatTemplateWhitespace, DashMarkersStripWhitespaceOnTheirSide) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a \n {%- if true -%} \n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a {{ 'b' }} c"), "a b c");
}

TEST(ChatTemplateWhitespace, TrimBlocksAndLstripBlocksAsTransformersSetsThem) {
  // trim_blocks drops the newline after %}; lstrip_blocks the indentation before {%; the
  // template's own trailing newline goes.
  EXPECT_EQ(render("{% if true %}\n  x\n{% endif %}\n"), "  x\n");
  EXPECT_EQ(render("  {% if true %}yes{% endif %}"), "yes");
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(render("x\n    {%+ if true %}y{% endif %}"), "x\n    y");
  EXPECT_EQ(render("{% if true +%}\nz{% endif %}"), "\nz");
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
  EXPECT_EQ(render("{# a comment #}\nx"), "x");
  EXPECT_EQ(render("l1\r\nl2"), "l1\nl2");
}

TEST(ChatTemplateWhitespace, RandomTemplatesRenderByteForByteAsJinja2Does) {
  Outcome outcome =
      run_shell_capturing(fornace::test_paths::python() + " " + fornace::test_paths::source() +
                          "/tests/reference/render_chat_template.py --random 2000 "
                          "11 >{out} 2>{err}");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  Json golden = Json::parse(outcome.out);
  TemplateValue variables = TemplateValue::from_json(golden["variables"].dump());
  size_t compared = 0;
  for (const Json& golden_case : golden["cases"]) {
    std::string source = golden_case["template"].get<std::string>();
    if (golden_case.contains("error")) {
      EXPECT_FALSE(render_error(source, golden["variables"].dump()).empty()) << source;
      continue;
    }
    EXPECT_EQ(ChatTemplate(source).render(variables.as_dict()), golden_case["text"]) << source;
    ++compared;
  }
  EXPECT_GE(compared, 1900u);
}

TEST(ChatTemplateStatements, LoopVariablesAndElse) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index0 }}{{ loop.index }}{{ x }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}"
                   "{{ loop.length }}|{% endfor %}"),
            "01aF3|12b3|23cL3|");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for c in 'hé' %}[{{ c }}]{% endfor %}"), "[h][é]");
  EXPECT_EQ(render("{% for k in d %}{{ k }}={{ d[k] }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;");
}

TEST(ChatTemplateStatements, SetInsideALoopStaysInTheLoopButNamespacesCarryOut) {
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i * 10 %}{{ x }},{% endfor %}{{ x }}"),
      "10,20,1");
  EXPECT_EQ(
      render("{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}"
             "{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
      "6 123");
  EXPECT_EQ(render("{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}"), "set in if");
  // Jinja's scoping: a name the loop body sets unconditionally, and nothing outside refers to,
  // is Undefined in the body until set, even where a global of that name exists.
  EXPECT_EQ(render("{% for i in [1] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = 2 %}"
                   "{% endfor %}",
                   R"({"x": "global"})"),
            "[]");
  EXPECT_EQ(render("{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}", R"({"x": "g"})"),
            "[g][g]");
  EXPECT_EQ(render("{% if 0 %}a{% elif '' %}b{% elif [0] %}c{% else %}d{% endif %}"), "c");
}

TEST(ChatTemplateExpressions, ArithmeticComparisonAndLogicFollowPython) {
  EXPECT_EQ(
      render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 * 3 + 1 }} "
             "{{ 2 ** 10 }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 0.1 + 0.2 }} {{ 1e-5 }}"),
      "3 -4 1 2 3.5 7 1024 abab [1, 2] 0.30000000000000004 1e-05");
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 1 < 2 < 3 }} "
                   "{{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ none }}"),
            "True True True True True True None");
  EXPECT_EQ(render("{{ true and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ 'k' in {'k': 1} }}"),
            "x y True True");
  EXPECT_EQ(render("{{ 'y' if 1 > 2 else 'n' }}[{{ 'z' if false }}]"), "n[]");
  EXPECT_EQ(render("{{ messages | length - 1 }}", R"({"messages": [1, 2, 3]})"), "2");
  EXPECT_EQ(render("{{ ['a', \"it's\", {'k': none}] }} {{ 'x' 'y' }}"),
            "['a', \"it's\", {'k': None}] xy");
}

TEST(ChatTemplateExpressions, IndexingAndSlicingCountCharacters) {
  EXPECT_EQ(render("{{ 'abcdef'[1:] }} {{ 'abcdef'[::-1] }} {{ [1, 2, 3, 4][-2:] }} "
                   "{{ 'héllo'[1] }} {{ 'abcdef'[1:5:2] }} {{ [1, 2, 3][-1] }} {{ 'añb'[::-1] }}"),
            "bcdef fedcba [3, 4] é bd 3 bña");
  EXPECT_EQ(render("{{ m['role'] }} {{ m.role }} [{{ m.missing }}] [{{ [1][5] }}]",
                   R"({"m": {"role": "user"}})"),
            "user user [] []");
}

TEST(ChatTemplateExpressions, FiltersAndStringMethods) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ [1, 2, 3] | length }}|{{ 'Ab' | upper }}"
                   "{{ 'Ab' | lower }}|{{ nothing | default('d') }}|{{ 5 | string }}"),
            "x|3|ABab|d|5");
  EXPECT_EQ(render("{{ {'k': [1, 'two', none, true, 1.5]} | tojson }}"),
            R"({"k": [1, "two", null, true, 1.5]})");
  EXPECT_EQ(render(R"({{ 'é\n"\\' | tojson }})"), R"("é\n\"\\")");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(
      render("{{ 'a<think>b</think>c'.split('</think>')[-1] }}|{{ 'xxhixx'.strip('x') }}|"
             "{{ '\nq\n'.lstrip('\n') }}|{{ ' a  b '.split() }}|{{ 'hello'.startswith('he') }}"
             "{{ 'hello'.endswith('lo') }}|{{ 'a-b-c'.replace('-', '+') }}"),
      "c|hi|q\n|['a', 'b']|TrueTrue|a+b+c");
  EXPECT_EQ(render("[{{ '\u00a0x\u3000' | trim }}]"), "[x]");
}

TEST(ChatTemplateExpressions, TestsOnValues) {
  EXPECT_EQ(
      render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is not string }} "
             "{{ false is false }} {{ 0 is false }} {{ d is mapping }} {{ 3 is odd }}",
             R"({"d": {}})"),
      "False True True True True False True True");
}

// ---- Undefined values and errors ------------------------------------------------------------

TEST(ChatTemplateUndefined, RendersEmptyButFailsOnAttributeAccess) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing | length }}][{{ missing is defined }}]"),
            "[][0][False]");
  EXPECT_EQ(render("{% for x in missing %}x{% endfor %}{% if missing %}y{% endif %}"), "");
  EXPECT_TRUE(contains(render_error("{{ missing.attribute }}"), "'missing' is undefined"));
  EXPECT_TRUE(contains(render_error("{{ d.nope.deeper }}", R"({"d": {}})"), "no attribute 'nope'"));
  EXPECT_TRUE(contains(render_error("{{ missing + 'x' }}"), "'missing' is undefined"));
}

TEST(ChatTemplateErrors, RaiseExceptionSurfacesItsMessage) {
  EXPECT_TRUE(contains(render_error("{{ raise_exception('Roles must alternate') }}"),
                       "Roles must alternate"));
}

TEST(ChatTemplateErrors, UnsupportedConstructsFailAtParseTimeNamingLineAndPrompt) {
  for (const std::string& source :
       {std::string("a\nb\n{% macro m() %}{% endmacro %}"), std::string("\n\n{{ x | map('y') }}"),
        std::string("\n\n{{ 'a'.format(1) }}"), std::string("\n\n{% include 'other' %}"),
        std::string("\n\n{{ strftime_now('%d') }}"),
        std::string("\n\n{% for a, b in x %}{% endfor %}")}) {
    // Parsing alone must refuse: nothing is rendered.
    std::string message;
    try {
      ChatTemplate parsed(source);
    } catch (const Error& error) {
      message = error.what();
    }
    EXPECT_TRUE(contains(message, "at line 3 is not supported")) << source << ": " << message;
    EXPECT_TRUE(contains(message, "--prompt")) << message;
  }
}

TEST(ChatTemplateErrors, SyntaxErrorsNameTheLine) {
  EXPECT_TRUE(contains(render_error("\n{% if true %}x"), "line 2: '{% if %}' is never closed"));
  EXPECT_TRUE(contains(render_error("{{ x "), "'{{' is never closed"));
  EXPECT_TRUE(contains(render_error("{% endif %}"), "unexpected '{% endif %}'"));
  EXPECT_TRUE(contains(render_error("{{ 1 2 }}"), "expected '}}', found '2'"));
  EXPECT_TRUE(contains(render_error("{{ (1 }}"), "unexpected '}'"));
  EXPECT_TRUE(contains(render_error("{{ 'a' + 1 }}"), "unsupported operand types"));
}

TEST(ChatTemplateHostile, DeepNestingIsRefusedWithoutCrashing) {
  EXPECT_TRUE(contains(
      render_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
      "nests deeper"));
  std::string blocks;
  for (int index = 0; index < 5000; ++index) blocks += "{% if true %}";
  EXPECT_TRUE(contains(render_error(blocks), "nest deeper"));
  std::string chain = "{{ x";
  for (int index = 0; index < 100000; ++index) chain += " + x";
  EXPECT_TRUE(contains(render_error(chain + " }}"), "nests deeper"));
  EXPECT_TRUE(contains(render_error("{{ " + std::string(100000, '-') + "1 }}"), "nests deeper"));
}

TEST(ChatTemplateHostile, HugeLoopsAndOutputsStopAtTheLimits) {
  ChatTemplateLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 20;
  EXPECT_TRUE(contains(render_error("{% for a in range(100000) %}{% for b in range(100000) %}"
                                    "{% endfor %}{% endfor %}",
                                    "{}", limits),
                       "steps"));
  EXPECT_TRUE(contains(render_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                                    "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                                    "{}", limits),
                       "bytes"));
  EXPECT_TRUE(contains(render_error("{{ 'x' * 1000000000000 }}", "{}", limits), "bytes"));
}

}  // namespace
}  // namespace fornace
