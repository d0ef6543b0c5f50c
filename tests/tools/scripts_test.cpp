// The shell scripts under scripts/: each fails loudly, with an `error:` line, when it cannot run.
#include <gtest/gtest.h>

#include <string>

#include "common/run_fornace.h"

namespace fornace {
namespace {

// Runs `bash scripts/<script> <arguments>` from the source tree.
Outcome run_script(const std::string& script, const std::string& arguments) {
  return run_shell_capturing(std::string("cd ") + FORNACE_SOURCE_DIR + " && bash scripts/" +
                             script + " " + arguments + " >{out} 2>{err} </dev/null");
}

TEST(BenchScript, MissingFornaceBenchIsAnError) {
  std::string build = std::string(FORNACE_BINARY_DIR) + "/no-such-build";
  Outcome outcome = run_script("bench.sh", build);
  expect_error(outcome, 1, build + "/bin/fornace-bench is not built");
  EXPECT_EQ(outcome.out, "");
}

}  // namespace
}  // namespace fornace
