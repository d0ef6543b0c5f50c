// Long work shows one updating progress line on stderr only when stderr is a terminal (a pty from
// util-linux's script here), and none under a pipe, --quiet or --json.
#include <gtest/gtest.h>

#include <string>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"

namespace fornace {
namespace {

// A prompt of 40 ids that runs in chunks of 8 to 15 tokens.
std::string chunked_prefill(const std::string& extra) {
  return fornace_binary() + " --model " + tiny_model_directory(DType::f32) +
         " --prompt-ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,"
         "28,29,30,31,32,33,34,35,36,37,38,39,40 --max-new-tokens 2 --prefill-chunk 8 " +
         extra;
}

// Runs `command` with a pseudo-terminal for its stdin, stdout and stderr; all output in `out`.
// Every update is drawn (no rate limit), so that a fast tiny model shows them all.
Outcome run_in_terminal(const std::string& command) {
  return run_shell_capturing("FORNACE_PROGRESS_INTERVAL_MS=0 script -qec '" + command +
                             "' /dev/null >{out} 2>{err} </dev/null");
}

TEST(Progress, APrefillInChunksShowsAnUpdatingLineOnATerminal) {
  Outcome outcome = run_in_terminal(chunked_prefill(""));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.out << outcome.err;
  EXPECT_NE(outcome.out.find("\rprefill: 0 / 40 tokens"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find(" / 40 tokens, "), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find(" s left"), std::string::npos) << outcome.out;
  // Erased before the generated text and the summary.
  EXPECT_NE(outcome.out.find("\r\x1b[K"), std::string::npos) << outcome.out;
}

TEST(Progress, APipeQuietOrJsonShowNoProgress) {
  Outcome piped = run_shell_capturing(chunked_prefill(">{out} 2>{err} </dev/null"));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("prefill:"), std::string::npos) << piped.err;
  for (const char* flag : {"--quiet", "--json"}) {
    Outcome outcome = run_in_terminal(chunked_prefill(flag));
    ASSERT_EQ(outcome.exit_code, 0) << flag << outcome.out;
    EXPECT_EQ(outcome.out.find("prefill:"), std::string::npos) << flag << outcome.out;
  }
}

TEST(Progress, SynthShowsTheMegabytesWrittenOnATerminalOnly) {
  std::string out = fornace::test_paths::build("progress-synth");
  std::string command = fornace_binary() + " synth --preset tiny --out " + out +
                        " --tokenizer-dir " + fornace::test_paths::source() + "/models";
  Outcome terminal = run_in_terminal(command);
  ASSERT_EQ(terminal.exit_code, 0) << terminal.out;
  EXPECT_NE(terminal.out.find("\rsynth: 0 / "), std::string::npos) << terminal.out;
  Outcome piped = run_shell_capturing(command + " >{out} 2>{err} </dev/null");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("synth:"), std::string::npos) << piped.err;
}

}  // namespace
}  // namespace fornace
