// `fornace tokenize`: JSON lines through the built tool give the reference ids and text, and bad
// input gives one "error:" line with exit code 1 (2 for usage).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/source_paths.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together.
};

// Runs `fornace tokenize <arguments>` with `input` on stdin.
CommandResult run_tokenize(const std::string& arguments, const std::string& input) {
  std::string binary = fornace::test_paths::build("bin/fornace");
  std::filesystem::path input_path = std::filesystem::temp_directory_path() /
                                     ("fornace-tokenize-input-" + std::to_string(getpid()));
  std::ofstream(input_path, std::ios::binary) << input;
  std::string command = binary + " tokenize " + arguments + " < " + input_path.string() + " 2>&1";
  CommandResult result{-1, ""};
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t read = 0;
    while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, read);
    int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::filesystem::remove(input_path);
  return result;
}

std::string model_flag() { return "--model " + testing::source_path("models"); }

class TokenizeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(fornace::test_paths::build("bin/fornace"))) {
      GTEST_SKIP() << "the fornace tool is not built";
    }
  }
};

// Reference ids from the Hugging Face tokenizers library (tests/data/tokenizer-golden.jsonl).
TEST_F(TokenizeCommand, EncodesJsonLinesToTheReferenceIds) {
  CommandResult result =
      run_tokenize(model_flag(), "\"Hello world\"\n\"a<|im_start|>b<|im_end|> <tool_call>x\"\n");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "[9707,1879]\n[64,151644,65,151645,220,151657,87]\n");
}

TEST_F(TokenizeCommand, DecodesIdArraysToJsonStrings) {
  CommandResult result = run_tokenize(model_flag() + " --decode", "[9707,1879]\n[151644,9707]\n");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "\"Hello world\"\n\"<|im_start|>Hello\"\n");
  result = run_tokenize(model_flag() + " --decode --skip-special", "[151644,9707]\n");
  EXPECT_EQ(result.output, "\"Hello\"\n");
}

TEST_F(TokenizeCommand, BadInputIsOneErrorLineWithExitCodeOne) {
  CommandResult result = run_tokenize(model_flag() + " --decode", "[9707]\n[999999]\n");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output.substr(result.output.find('\n') + 1).rfind("error: stdin line 2: ", 0),
            0u)
      << result.output;
  result = run_tokenize(model_flag(), "not json\n");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output, "error: stdin line 1: not valid JSON\n");
}

TEST_F(TokenizeCommand, MissingModelIsAUsageError) {
  CommandResult result = run_tokenize("", "");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output, "error: --model is required (see fornace tokenize --help)\n");
}

TEST_F(TokenizeCommand, ContradictoryFlagsAreUsageErrors) {
  CommandResult result = run_tokenize(model_flag() + " --decode --no-special", "");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output.rfind("error: --no-special applies to encoding", 0), 0u) << result.output;
  result = run_tokenize("--model=" + testing::source_path("models") + " --skip-special", "");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output.rfind("error: --skip-special applies to --decode only", 0), 0u)
      << result.output;
}

TEST_F(TokenizeCommand, HelpListsTheFlagsWithExitCodeZero) {
  CommandResult result = run_tokenize("--help", "");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output.rfind("usage: fornace tokenize --model DIR", 0), 0u) << result.output;
  for (const char* flag : {"--model", "--decode", "--no-special", "--skip-special"}) {
    EXPECT_NE(result.output.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace fornace
