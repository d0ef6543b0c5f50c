// The benchmark prompts encode to exactly the token counts their names promise (plain encode,
// no chat template): 512, 2048, 8192, 16,384 and 32,512 tokens of prompt plus one, as cut with the
// reference tokenizer (the longest plus 255 new tokens fits Qwen2.5's window of 32,768); the .ids
// prompts hold those ids for every family's vocabulary.
#include <gtest/gtest.h>

#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

size_t prompt_tokens(const std::string& name) {
  std::string text = testing::read_test_file(testing::source_path("bench/prompts/" + name));
  EXPECT_EQ(text.rfind("CHAPTER I\n", 0), 0u) << name << " should start at chapter I";
  return testing::qwen_tokenizer().encode(text).size();
}

TEST(BenchPrompts, Alice512EncodesTo513Tokens) { EXPECT_EQ(prompt_tokens("alice-512.txt"), 513u); }

TEST(BenchPrompts, Alice2048EncodesTo2049Tokens) {
  EXPECT_EQ(prompt_tokens("alice-2048.txt"), 2049u);
}

TEST(BenchPrompts, LongContextPromptsEncodeTo8k16kAnd32kTokensPlusOne) {
  EXPECT_EQ(prompt_tokens("alice-8k.txt"), 8193u);
  EXPECT_EQ(prompt_tokens("alice-16k.txt"), 16385u);
  EXPECT_EQ(prompt_tokens("alice-32k.txt"), 32513u);
}

// The .ids prompts, for every family's synthetic model alike: the text's Qwen ids modulo 49,152,
// the smallest vocabulary among the presets (SmolLM2's).
TEST(BenchPrompts, IdsPromptsAreTheTextsIdsWithinEveryPresetsVocabulary) {
  for (const char* name : {"alice-512", "alice-2048", "alice-8k", "alice-16k", "alice-32k"}) {
    std::string text = testing::read_test_file(
        testing::source_path(std::string("bench/prompts/") + name + ".txt"));
    std::string expected;
    for (uint32_t id : testing::qwen_tokenizer().encode(text)) {
      expected += (expected.empty() ? "" : ",") + std::to_string(id % 49152);
    }
    std::string ids = testing::read_test_file(
        testing::source_path(std::string("bench/prompts/") + name + ".ids"));
    EXPECT_EQ(ids, expected + "\n") << name;
  }
}

}  // namespace
}  // namespace fornace
