// Parity of the Gemma 3, Llama 3, Llama 3.1 and Qwen3 tokenizers with the Hugging Face tokenizers
// library: ids and decoded text for every case of tests/data/tokenizer-golden-<family>.jsonl
// (made by tests/reference/make_tokenizer_golden.js, with add_special_tokens off), the whole
// alice corpus, and Gemma 3's chat template through its tokenizer.
#include <map>

#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using testing::source_path;

using testing::GoldenCase;

const std::vector<GoldenCase>& golden_cases(const std::string& family) {
  return testing::cached_golden_cases("tests/data/tokenizer-golden-" + family + ".jsonl");
}

const Tokenizer& family_tokenizer(const std::string& family) {
  static std::map<std::string, Tokenizer> by_family;
  auto found = by_family.find(family);
  if (found == by_family.end()) {
    std::string directory = source_path("models/tokenizers/" + family);
    found = by_family.emplace(family, Tokenizer::load(directory)).first;
  }
  return found->second;
}

class TokenizerFamily : public ::testing::TestWithParam<std::string> {
 protected:
  const Tokenizer& tokenizer() const { return family_tokenizer(GetParam()); }
  const std::vector<GoldenCase>& cases() const { return golden_cases(GetParam()); }
};

TEST_P(TokenizerFamily, HasAtLeastTwoHundredCasesAndTheCorpus) {
  ASSERT_GE(cases().size(), 200u);
  EXPECT_EQ(cases().back().name, "alice corpus");
  EXPECT_GT(cases().back().ids.size(), 30000u);
}

TEST_P(TokenizerFamily, EncodeGivesTheReferenceIdsForEveryCase) {
  size_t equal = 0;
  for (const GoldenCase& golden : cases()) {
    std::vector<uint32_t> ids = tokenizer().encode(golden.text);
    if (ids == golden.ids) {
      ++equal;
    } else if (ids.size() < 200 && golden.ids.size() < 200) {
      EXPECT_EQ(ids, golden.ids) << "case: " << golden.name;
    } else {
      ADD_FAILURE() << "case: " << golden.name << ": " << ids.size() << " ids, the reference has "
                    << golden.ids.size();
    }
  }
  EXPECT_EQ(equal, cases().size())
      << GetParam() << ": equal ids in " << equal << " of " << cases().size() << " cases";
}

TEST_P(TokenizerFamily, DecodeOfEncodeIsTheReferenceDecodeOfItsIds) {
  size_t equal = 0;
  for (const GoldenCase& golden : cases()) {
    std::string decoded = tokenizer().decode(tokenizer().encode(golden.text));
    equal += decoded == golden.decoded;
    EXPECT_EQ(decoded, golden.decoded) << "case: " << golden.name;
  }
  EXPECT_EQ(equal, cases().size())
      << GetParam() << ": equal decodes in " << equal << " of " << cases().size() << " cases";
}

TEST_P(TokenizerFamily, DecodeMatchesTheReferenceWithAndWithoutSpecialTokens) {
  testing::expect_reference_decodes(tokenizer(), cases());
}

TEST_P(TokenizerFamily, DecodingOneTokenAtATimeMatchesTheReference) {
  EXPECT_GT(testing::expect_reference_decodes_of_each_id(tokenizer(), cases()), 1000u);
}

TEST_P(TokenizerFamily, IncrementalDecoderConcatenatesToTheReferenceText) {
  testing::expect_incremental_decodes(tokenizer(), cases());
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerFamily,
                         ::testing::Values("gemma3", "llama3", "llama3_1", "qwen3"));

TEST(GemmaTokenizer, CharactersMissingFromTheVocabularyBecomeByteTokens) {
  const Tokenizer& tokenizer = family_tokenizer("gemma3");
  // U+10FFFF is not in Gemma's vocabulary: its four UTF-8 bytes F4 8F BF BF become <0xNN> tokens.
  std::vector<uint32_t> ids = tokenizer.encode("\xF4\x8F\xBF\xBF");
  std::vector<std::string> expected = {"<0xF4>", "<0x8F>", "<0xBF>", "<0xBF>"};
  ASSERT_EQ(ids.size(), expected.size());
  for (size_t index = 0; index < ids.size(); ++index) {
    EXPECT_EQ(tokenizer.token_to_id(expected[index]), ids[index]);
    EXPECT_EQ(tokenizer.token_bytes(ids[index]), std::string(1, "\xF4\x8F\xBF\xBF"[index]));
  }
  // A run of byte tokens that is not UTF-8 is one U+FFFD per byte, as ByteFallback decodes it.
  EXPECT_EQ(tokenizer.decode({ids[0], ids[1], *tokenizer.token_to_id("a")}),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(tokenizer.token_bytes(*tokenizer.token_to_id("\xE2\x96\x81the")), " the");
}

// tokenizer.json's post-processor names the token that Hugging Face's encode puts first by
// default: Gemma's TemplateProcessing starts with <bos>; Qwen3's ByteLevel adds nothing.
TEST(GemmaTokenizer, ThePostProcessorsLeadingTokenIsBos) {
  EXPECT_EQ(family_tokenizer("gemma3").prefix_token_id(),
            family_tokenizer("gemma3").token_to_id("<bos>"));
  EXPECT_TRUE(family_tokenizer("gemma3").prefix_token_id().has_value());
  EXPECT_FALSE(family_tokenizer("qwen3").prefix_token_id().has_value());
}

TEST(GemmaTokenizer, AppliesItsChatTemplateAsJinja2RendersIt) {
  Tokenizer tokenizer = Tokenizer::load(source_path("models/tokenizers/gemma3"));
  std::string prompt = tokenizer.apply_chat_template(
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Who are you?"}},
      true);
  // Rendered by tests/reference/render_chat_template.py (Jinja2) from the same
  // tokenizer_config.json, and the ids the Hugging Face library gives that text.
  EXPECT_EQ(prompt,
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
            "Hello.<end_of_turn>\n<start_of_turn>user\nWho are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(
      tokenizer.encode(prompt),
      (std::vector<uint32_t>{2,   105,   2364, 107, 3912,   8652,   236761, 108, 10979, 106,
                             107, 105,   4368, 107, 9259,   236761, 106,    107, 105,   2364,
                             107, 15938, 659,  611, 236881, 106,    107,    105, 4368,  107}));
  EXPECT_EQ(tokenizer.eos_token_id(),
            tokenizer.token_to_id("<end_of_turn>"));  // Its config says so.
}

}  // namespace
}  // namespace fornace
