// fornace-bench's progress: one updating line on a terminal, none under a pipe or --quiet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;

const std::string kBench = fornace::test_paths::build("bin/fornace-bench");

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

class BenchProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/fornace-bench-progress-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    short_prompt_ = (directory_ / "short.ids").string();
    std::ofstream(short_prompt_) << "9707 11 1879 374 264 1273 13 1096 374 1172\n";
    // 1,024 tokens: a prefill in two chunks of 512, which reports its progress.
    long_prompt_ = (directory_ / "long.ids").string();
    std::ofstream long_file(long_prompt_);
    for (int index = 0; index < 1024; ++index) long_file << 100 + index % 1000 << " ";
  }
  void TearDown() override { fs::remove_all(directory_); }

  // The bench on tiny models, 2 recorded runs of 6 new tokens, then `extra`.
  std::string bench(const std::string& models, const std::string& prompts,
                    const std::string& extra = "") const {
    return kBench + " --model " + models + " --kv-cache prealloc,cat --prompts " + prompts +
           " --runs 2 --warmup 1 --max-new-tokens 6 --threads 1 --read-bandwidth 10 --out " +
           (directory_ / "runs.csv").string() + " " + extra;
  }

  // Runs `command` with a pseudo-terminal for its stdin, stdout and stderr, every progress
  // update drawn; all output in `out`.
  static Outcome run_in_terminal(const std::string& command, const std::string& environment = "") {
    return run_shell_capturing(environment + " FORNACE_PROGRESS_INTERVAL_MS=0 script -qec '" +
                               command + "' /dev/null >{out} 2>{err} </dev/null");
  }
  static Outcome run_piped(const std::string& command, const std::string& environment = "") {
    return run_shell_capturing(environment + " FORNACE_PROGRESS_INTERVAL_MS=0 " + command +
                               " >{out} 2>{err} </dev/null");
  }

  fs::path directory_;
  std::string short_prompt_;
  std::string long_prompt_;
};

TEST_F(BenchProgressTest, ATerminalShowsOneUpdatingLineErasedBeforeTheTables) {
  const std::string tiny = tiny_model_directory(DType::f32);
  Outcome outcome = run_in_terminal(bench(tiny, short_prompt_ + "," + long_prompt_));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.out;
  const std::string& out = outcome.out;
  for (const char* text :
       {"\rbench: child 1 of 2 (tiny-f32, fused, prealloc): loading the model\x1b[K",
        "\rbench: child 1 of 2 (tiny-f32, fused, prealloc): short.ids, warm-up 1 of 1, token 1 of "
        "6\x1b[K",
        "\rbench: child 2 of 2 (tiny-f32, fused, cat): long.ids, run 2 of 2, prefill 512 of 1,024 "
        "tokens, ",
        "\rbench: child 2 of 2 (tiny-f32, fused, cat): long.ids, run 2 of 2, token 6 of 6, "}) {
    EXPECT_NE(out.find(text), std::string::npos) << text << "\n" << out;
  }
  EXPECT_NE(out.find(" tok/s, "), std::string::npos) << out;
  EXPECT_NE(out.find(" s left\x1b[K"), std::string::npos) << out;
  // Each drawing ends where the next one starts over: no newline ends the line.
  size_t last_drawn = std::string::npos;
  for (size_t at = out.find("\rbench: "); at != std::string::npos;
       at = out.find("\rbench: ", at + 1)) {
    size_t end = out.find("\x1b[K", at);
    ASSERT_NE(end, std::string::npos) << out.substr(at);
    EXPECT_NE(out[end + 3], '\n') << out.substr(at, end - at);
    EXPECT_NE(out.compare(end + 3, 2, "\r\n"), 0) << out.substr(at, end - at);
    last_drawn = end;
  }
  ASSERT_NE(last_drawn, std::string::npos) << out;
  // Erased after the last drawing, before the tables on stdout.
  size_t erased = out.find("\r\x1b[K", last_drawn);
  size_t tables = out.find("| `prealloc` ");
  ASSERT_NE(tables, std::string::npos) << out;
  EXPECT_LT(erased, tables) << out;
  EXPECT_EQ(out.find("bench: ", tables), std::string::npos) << out.substr(tables);
  // The children report no lines of their own.
  EXPECT_EQ(out.find(" pid "), std::string::npos) << out;
}

TEST_F(BenchProgressTest, TheLineIsCutToTheTerminalsWidth) {
  const std::string tiny = tiny_model_directory(DType::f32);
  Outcome outcome = run_in_terminal("stty cols 50; " + bench(tiny, short_prompt_));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.out;
  const std::string& out = outcome.out;
  size_t drawings = 0;
  for (size_t at = out.find("\rbench: "); at != std::string::npos;
       at = out.find("\rbench: ", at + 1)) {
    size_t end = out.find("\x1b[K", at);
    ASSERT_NE(end, std::string::npos) << out.substr(at);
    EXPECT_LE(end - at - 1, 49u) << out.substr(at, end - at);
    ++drawings;
  }
  EXPECT_GT(drawings, 10u) << out;
  EXPECT_NE(out.find("\rbench: child 2 of 2 (tiny-f32, fused, cat): short\x1b[K"),
            std::string::npos)
      << out;
}

TEST_F(BenchProgressTest, APipeOrQuietShowNoProgressAndNoChildLines) {
  const std::string tiny = tiny_model_directory(DType::f32);
  Outcome piped = run_piped(bench(tiny, short_prompt_));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_NE(piped.out.find("| `prealloc` "), std::string::npos) << piped.out;
  EXPECT_EQ(piped.err.find("bench: child"), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  // Only the bench's own summary lines, the files written last.
  for (const std::string& line : lines_of(piped.err)) {
    EXPECT_EQ(line.rfind("[bench] ", 0), 0u) << line;
  }
  EXPECT_NE(piped.err.find("[bench] wrote " + (directory_ / "runs.csv").string()),
            std::string::npos)
      << piped.err;

  Outcome quiet_piped = run_piped(bench(tiny, short_prompt_, "--quiet"));
  ASSERT_EQ(quiet_piped.exit_code, 0) << quiet_piped.err;
  EXPECT_EQ(quiet_piped.err, "");
  EXPECT_NE(quiet_piped.out.find("| `prealloc` "), std::string::npos) << quiet_piped.out;

  Outcome quiet_terminal = run_in_terminal(bench(tiny, short_prompt_, "--quiet"));
  ASSERT_EQ(quiet_terminal.exit_code, 0) << quiet_terminal.out;
  EXPECT_NE(quiet_terminal.out.find("| `prealloc` "), std::string::npos) << quiet_terminal.out;
  EXPECT_EQ(quiet_terminal.out.find("bench: "), std::string::npos) << quiet_terminal.out;
  EXPECT_EQ(quiet_terminal.out.find("[bench]"), std::string::npos) << quiet_terminal.out;
  EXPECT_EQ(quiet_terminal.out.find("\x1b[K"), std::string::npos) << quiet_terminal.out;
}

TEST_F(BenchProgressTest, ACrashedChildsErrorShowsOnATerminalUnderAPipeAndWithQuiet) {
  const std::string models = synthetic_model_directory("tiny", DType::f32) + "," +
                             synthetic_model_directory("tiny-llama", DType::f32);
  const std::string fault = "FORNACE_BENCH_TEST_FAULT=abort:cat";
  const std::string relayed = "cat pid ";
  const std::string aborting = "] test fault (FORNACE_BENCH_TEST_FAULT): aborting";
  const std::string error = "error: the tiny-llama-f32 cat child (pid ";

  Outcome terminal = run_in_terminal(bench(models, short_prompt_), fault);
  EXPECT_EQ(terminal.exit_code, 1) << terminal.out;
  // The progress line is erased before the child's stderr line and before the error.
  EXPECT_NE(terminal.out.find("\r\x1b[K[tiny-llama-f32 " + relayed), std::string::npos)
      << terminal.out;
  EXPECT_NE(terminal.out.find(aborting), std::string::npos) << terminal.out;
  EXPECT_NE(terminal.out.find("\r\x1b[K" + error), std::string::npos) << terminal.out;
  EXPECT_NE(terminal.out.find("\rbench: child 4 of 4 (tiny-llama-f32, fused, cat): "),
            std::string::npos)
      << terminal.out;

  // A crashed child's error shows in every mode, and with --quiet nothing else does.
  for (const std::string extra : {"", "--quiet"}) {
    Outcome piped = run_piped(bench(models, short_prompt_, extra), fault);
    EXPECT_EQ(piped.exit_code, 1) << extra << piped.err;
    EXPECT_NE(piped.err.find("[tiny-f32 " + relayed), std::string::npos) << extra << piped.err;
    EXPECT_NE(piped.err.find(aborting), std::string::npos) << extra << piped.err;
    EXPECT_NE(piped.err.find(error), std::string::npos) << extra << piped.err;
    EXPECT_NE(piped.err.find("killed by signal " + std::to_string(SIGABRT)), std::string::npos)
        << extra << piped.err;
    EXPECT_EQ(piped.err.find("bench: child"), std::string::npos) << extra << piped.err;
    // The two prealloc children report nothing of their own.
    EXPECT_EQ(piped.err.find("prealloc"), std::string::npos) << extra << piped.err;
    EXPECT_EQ(piped.err.find("[bench]") == std::string::npos, extra == "--quiet") << piped.err;
  }
}

}  // namespace
}  // namespace fornace
