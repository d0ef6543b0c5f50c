// Parity with the Hugging Face tokenizers library: ids, decoded text and per-token decoding for
// every case of tests/data/tokenizer-golden.jsonl (made by
// tests/reference/make_tokenizer_golden.js).
#include <nlohmann/json.hpp>
#include <thread>

#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using testing::GoldenCase;
using testing::qwen_tokenizer;
using testing::read_test_file;
using testing::source_path;

const std::vector<GoldenCase>& golden_cases() {
  static const std::vector<GoldenCase> cases =
      testing::read_golden_cases("tests/data/tokenizer-golden.jsonl");
  return cases;
}

TEST(TokenizerGolden, HasAtLeastThreeHundredCases) { EXPECT_GE(golden_cases().size(), 300u); }

TEST(TokenizerGolden, EncodeGivesTheReferenceIdsForEveryCase) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  size_t mismatches = 0;
  for (const GoldenCase& golden : golden_cases()) {
    std::vector<uint32_t> ids = tokenizer.encode(golden.text);
    EXPECT_EQ(ids, golden.ids) << "case: " << golden.name;
    mismatches += ids != golden.ids;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(TokenizerGolden, DecodeOfEncodeIsTheNfcText) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  for (const GoldenCase& golden : golden_cases()) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(golden.text)), golden.nfc)
        << "case: " << golden.name;
  }
}

TEST(TokenizerGolden, DecodeMatchesTheReferenceWithAndWithoutSpecialTokens) {
  testing::expect_reference_decodes(qwen_tokenizer(), golden_cases());
}

TEST(TokenizerGolden, DecodingOneTokenAtATimeReplacesPartialCharactersLikeTheReference) {
  EXPECT_GT(testing::expect_reference_decodes_of_each_id(qwen_tokenizer(), golden_cases()), 1000u);
}

TEST(TokenizerGolden, IncrementalDecoderConcatenatesToTheReferenceText) {
  testing::expect_incremental_decodes(qwen_tokenizer(), golden_cases());
}

TEST(TokenizerGolden, ThreadsEncodingAtOnceAllGetTheReferenceIds) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  std::vector<size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t thread = 0; thread < mismatches.size(); ++thread) {
    threads.emplace_back([&, thread] {
      for (const GoldenCase& golden : golden_cases()) {
        mismatches[thread] += tokenizer.encode(golden.text) != golden.ids;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<size_t>(4, 0));
}

TEST(TokenizerGolden, WholeAliceCorpusGivesTheReferenceIds) {
  std::string corpus = read_test_file(source_path("tests/data/alice.txt"));
  auto expected =
      nlohmann::json::parse(read_test_file(source_path("tests/data/tokenizer-alice-ids.json")))
          .get<std::vector<uint32_t>>();
  std::vector<uint32_t> ids = qwen_tokenizer().encode(corpus);
  ASSERT_EQ(ids.size(), expected.size());
  EXPECT_TRUE(ids == expected);
}

}  // namespace
}  // namespace fornace
