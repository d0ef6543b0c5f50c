// The tool-call parser on Qwen's tagged form and Llama 3's JSON form, fed whole and in every split.
#include "text/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace fornace::text {
namespace {

using nlohmann::json;

struct Parsed {
  std::string content;             // As the deltas gave it.
  std::vector<ToolCall> calls;     // As the deltas built them.
  std::vector<ToolCall> recorded;  // As the parser kept them.
};

// Feeds `pieces` in turn; rebuilds content and calls from the deltas, checking that a call's
// first delta carries its id and name and later ones do not.
Parsed parse(ToolCallFormat format, const std::vector<std::string>& pieces) {
  ToolCallParser parser(format, "call_");
  Parsed parsed;
  auto take = [&](const ToolCallParser::Output& output) {
    parsed.content += output.content;
    for (const ToolCallDelta& delta : output.calls) {
      if (delta.index == static_cast<int64_t>(parsed.calls.size())) {
        EXPECT_FALSE(delta.id.empty());
        parsed.calls.push_back(ToolCall{delta.id, delta.name, ""});
      } else {
        EXPECT_EQ(delta.index, static_cast<int64_t>(parsed.calls.size()) - 1);
        EXPECT_TRUE(delta.id.empty() && delta.name.empty());
      }
      parsed.calls.back().arguments += delta.arguments;
    }
  };
  for (const std::string& piece : pieces) take(parser.push(piece));
  take(parser.finish());
  parsed.recorded = parser.calls();
  EXPECT_EQ(parser.content(), parsed.content);
  return parsed;
}

// `text` whole, one byte at a time, and split at every point in two: the same result each time.
Parsed parse_every_way(ToolCallFormat format, const std::string& text) {
  Parsed whole = parse(format, {text});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  std::vector<Parsed> others = {parse(format, bytes)};
  for (size_t split = 1; split < text.size(); ++split) {
    others.push_back(parse(format, {text.substr(0, split), text.substr(split)}));
  }
  for (const Parsed& other : others) {
    EXPECT_EQ(other.content, whole.content);
    EXPECT_EQ(other.calls.size(), whole.calls.size());
    for (size_t i = 0; i < std::min(other.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(other.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(other.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    EXPECT_EQ(whole.recorded[i].arguments, whole.calls[i].arguments);
    EXPECT_EQ(whole.recorded[i].id, "call_" + std::to_string(i));
  }
  return whole;
}

TEST(ToolCallFormat, ComesFromTheTemplatesInstructions) {
  EXPECT_EQ(tool_call_format("{{ tools }} <tool_call>\n{\"name\": ...}</tool_call>"),
            ToolCallFormat::tagged);
  EXPECT_EQ(tool_call_format("{% if tools %}{\"name\": function name, \"parameters\": ...}"),
            ToolCallFormat::json);
  EXPECT_EQ(tool_call_format("{{ messages }}"), ToolCallFormat::none);
}

TEST(ToolCallParser, TaggedCallsAfterTextBecomeCallsAndTheTextContent) {
  const json first_arguments = {{"city", "Paris \"center\" {x}"}, {"days", json::array({1, 2})}};
  const std::string text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " +
                           first_arguments.dump() +
                           "}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                           "{}}\n</tool_call>";
  Parsed parsed = parse_every_way(ToolCallFormat::tagged, text);
  EXPECT_EQ(parsed.content, "Let me check.");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(parsed.calls[0].arguments), first_arguments);
  EXPECT_EQ(parsed.calls[1].name, "get_time");
  EXPECT_EQ(parsed.calls[1].arguments, "{}");
}

TEST(ToolCallParser, TextThatOnlyLooksLikeATagStaysContent) {
  Parsed parsed = parse_every_way(ToolCallFormat::tagged, "a <tool call> and <tool_ca");
  EXPECT_EQ(parsed.content, "a <tool call> and <tool_ca");
  EXPECT_TRUE(parsed.calls.empty());
  parsed = parse_every_way(ToolCallFormat::tagged, "x <tool_call>not json</tool_call> y");
  EXPECT_EQ(parsed.content, "x <tool_call>not json</tool_call> y");
  EXPECT_TRUE(parsed.calls.empty());
  parsed = parse_every_way(ToolCallFormat::none, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  EXPECT_EQ(parsed.content, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
}

TEST(ToolCallParser, ACallCutOffKeepsItsArgumentsSoFar) {
  Parsed parsed =
      parse_every_way(ToolCallFormat::tagged, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, ");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, "{\"a\": [1, ");
  EXPECT_EQ(parsed.content, "");
}

TEST(ToolCallParser, LlamasJsonCallIsTheWholeAnswer) {
  const json arguments = {{"query", "a } b"}, {"limit", 3}};
  Parsed parsed = parse_every_way(
      ToolCallFormat::json, "  {\"name\": \"search\", \"parameters\": " + arguments.dump() + "}");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "search");
  EXPECT_EQ(json::parse(parsed.calls[0].arguments), arguments);
  EXPECT_EQ(parsed.content, "");
  parsed = parse_every_way(ToolCallFormat::json, "Hello {\"name\": \"x\"}");
  EXPECT_EQ(parsed.content, "Hello {\"name\": \"x\"}");
  EXPECT_TRUE(parsed.calls.empty());
  parsed = parse_every_way(ToolCallFormat::json, "{\"answer\": 42}");
  EXPECT_EQ(parsed.content, "{\"answer\": 42}");
  EXPECT_TRUE(parsed.calls.empty());
}

}  // namespace
}  // namespace fornace::text
