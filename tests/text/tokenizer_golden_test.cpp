// Parity with the Hugging Face tokenizers library: ids, decoded text and per-token decoding for
// every case of tests/data/tokenizer-golden.jsonl (made by
// tests/reference/make_tokenizer_golden.js).
#include <nlohmann/json.hpp>
#include <thread>

#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using testing::qwen_tokenizer;
using testing::read_test_file;
using testing::source_path;

struct GoldenCase {
  std::string name;
  std::string text;
  std::vector<uint32_t> ids;
  std::string nfc;
  std::string decoded;
  std::string decoded_skip_special;
  std::vector<std::string> decoded_each;  // Empty for long cases.
};

const std::vector<GoldenCase>& golden_cases() {
  static const std::vector<GoldenCase> cases = [] {
    std::vector<GoldenCase> loaded;
    std::istringstream lines(read_test_file(source_path("tests/data/tokenizer-golden.jsonl")));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      nlohmann::json record = nlohmann::json::parse(line);
      GoldenCase golden;
      golden.name = record["name"];
      golden.text = record["text"];
      golden.ids = record["ids"].get<std::vector<uint32_t>>();
      golden.nfc = record["nfc"];
      golden.decoded = record["decoded"];
      golden.decoded_skip_special = record["decoded_skip_special"];
      if (record.contains("decoded_each")) {
        golden.decoded_each = record["decoded_each"].get<std::vector<std::string>>();
      }
      loaded.push_back(std::move(golden));
    }
    return loaded;
  }();
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
  const Tokenizer& tokenizer = qwen_tokenizer();
  for (const GoldenCase& golden : golden_cases()) {
    EXPECT_EQ(tokenizer.decode(golden.ids), golden.decoded) << "case: " << golden.name;
    EXPECT_EQ(tokenizer.decode(golden.ids, true), golden.decoded_skip_special)
        << "case: " << golden.name;
  }
}

TEST(TokenizerGolden, DecodingOneTokenAtATimeReplacesPartialCharactersLikeTheReference) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  size_t checked = 0;
  for (const GoldenCase& golden : golden_cases()) {
    for (size_t index = 0; index < golden.decoded_each.size(); ++index) {
      EXPECT_EQ(tokenizer.decode({golden.ids[index]}), golden.decoded_each[index])
          << "case: " << golden.name << ", token " << index;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000u);
}

TEST(TokenizerGolden, IncrementalDecoderConcatenatesToTheReferenceText) {
  const Tokenizer& tokenizer = qwen_tokenizer();
  for (const GoldenCase& golden : golden_cases()) {
    for (bool skip_special : {false, true}) {
      IncrementalDecoder decoder(tokenizer, skip_special);
      std::string streamed;
      for (uint32_t id : golden.ids) streamed += decoder.push(id);
      streamed += decoder.flush();
      EXPECT_EQ(streamed, skip_special ? golden.decoded_skip_special : golden.decoded)
          << "case: " << golden.name;
    }
  }
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
