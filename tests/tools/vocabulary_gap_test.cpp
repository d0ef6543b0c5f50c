// fornace streams on when the model emits an id that its tokenizer lacks (embedding rows past it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"

namespace fornace {
namespace {

constexpr int kTokenizerIds = 1000;

// The Qwen tokenizer cut to its first kTokenizerIds ids (bytes and the merges that make them),
// beside the tiny model's 151,936-row embedding (its files linked), in the test's `out`.
std::string model_with_a_smaller_tokenizer(const ScratchPath& out) {
  namespace fs = std::filesystem;
  std::string model = tiny_model_directory(DType::f32);
  const fs::path& directory = out.path();
  fs::create_directories(directory);
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::create_hard_link(fs::path(model) / file, directory / file);
  }
  nlohmann::json tokenizer =
      nlohmann::json::parse(slurp(fornace::test_paths::source("models/tokenizer.json")));
  nlohmann::json& vocab = tokenizer["model"]["vocab"];
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [token, id] : vocab.items()) {
    if (id.get<int>() < kTokenizerIds) kept[token] = id;
  }
  nlohmann::json merges = nlohmann::json::array();
  for (const nlohmann::json& merge : tokenizer["model"]["merges"]) {
    std::string joined = merge.is_string() ? merge.get<std::string>()
                                           : merge[0].get<std::string>() + " " +
                                                 merge[1].get<std::string>();
    std::string merged = joined;
    merged.erase(merged.find(' '), 1);
    if (kept.contains(merged)) merges.push_back(merge);
  }
  vocab = kept;
  tokenizer["model"]["merges"] = merges;
  tokenizer["added_tokens"] = nlohmann::json::array();
  std::ofstream(directory / "tokenizer.json") << tokenizer.dump();
  return directory.string();
}

TEST(VocabularyGap, GenerationGoesOnPastIdsTheTokenizerLacks) {
  ScratchPath out("small-tokenizer-generate");
  std::string model = model_with_a_smaller_tokenizer(out);
  Outcome outcome = run_fornace("--model " + model +
                                " --prompt-ids 1,2,3 --max-new-tokens 24 --ignore-eos --json");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  std::string last_line = outcome.out.substr(outcome.out.rfind('\n', outcome.out.size() - 2) + 1);
  nlohmann::json summary = nlohmann::json::parse(last_line);
  ASSERT_EQ(summary["generated_ids"].size(), 24u);
  int beyond = 0;
  for (const nlohmann::json& id : summary["generated_ids"]) beyond += id.get<int>() >= kTokenizerIds;
  // With 151,936 rows against 1,000 tokens, nearly every generated id is past the tokenizer.
  EXPECT_GT(beyond, 0) << "no generated id past the tokenizer: the test shows nothing";
  EXPECT_NE(outcome.err.find("decode: 24 tokens"), std::string::npos) << outcome.err;
}

TEST(VocabularyGap, TokenizeDecodeStillRefusesTheUsersIdsOutOfRange) {
  ScratchPath out("small-tokenizer-tokenize");
  std::string model = model_with_a_smaller_tokenizer(out);
  Outcome outcome = run_shell_capturing("echo '[1, 2, 1500]' | " + fornace_binary() +
                                        " tokenize --model " + model + " --decode >{out} 2>{err}");
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_NE(outcome.err.find("error: "), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("1500"), std::string::npos) << outcome.err;
}

}  // namespace
}  // namespace fornace
