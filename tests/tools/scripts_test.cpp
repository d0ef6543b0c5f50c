// The shell scripts under scripts/: each fails loudly, with an `error:` line, when it cannot run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/run_fornace.h"
#include "common/source_paths.h"

namespace fornace {
namespace {

// Runs `bash scripts/<script> <arguments>` from the source tree.
Outcome run_script(const std::string& script, const std::string& arguments) {
  return run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                             " && bash scripts/" + script + " " + arguments +
                             " >{out} 2>{err} </dev/null");
}

TEST(BenchScript, MissingFornaceBenchIsAnError) {
  std::string build = fornace::test_paths::build("no-such-build");
  Outcome outcome = run_script("bench.sh", build);
  expect_error(outcome, 1, build + "/bin/fornace-bench is not built");
  EXPECT_EQ(outcome.out, "");
}

TEST(DownloadModelScript, AnUnknownModelNameListsTheKnownOnes) {
  Outcome outcome = run_script("download-model.sh", "gpt-5 /nonexistent");
  expect_error(outcome, 2, "unknown model 'gpt-5'");
  EXPECT_NE(outcome.err.find("gemma3-270m"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("llama-3.2-1b"), std::string::npos) << outcome.err;
}

TEST(DownloadModelScript, AnUnreachableHostIsOneErrorLineThatNamesTheSyntheticWayOut) {
  std::string dest = fornace::test_paths::build("download-test");
  // Port 9 (discard) on loopback: nothing listens there, so the probe is refused at once.
  Outcome outcome =
      run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                          " && HF_ENDPOINT=http://127.0.0.1:9 bash scripts/download-model.sh "
                          "qwen3-0.6b " +
                          dest + " >{out} 2>{err} </dev/null");
  expect_error(outcome, 1, "cannot reach http://127.0.0.1:9 to download Qwen/Qwen3-0.6B");
  EXPECT_NE(outcome.err.find("fornace synth --preset qwen3-0.6b"), std::string::npos);
}

// setup.sh with stand-ins for dpkg-query (every package missing) and apt-get (update finds the
// package lists locked `locked_updates` times, then succeeds), apt-get's calls on stderr. The
// stand-ins go in a directory of their own per `locked_updates`, since CTest runs tests at once.
Outcome run_setup_with_locked_lists(int locked_updates, const std::string& update_error) {
  namespace fs = std::filesystem;
  fs::path bin =
      fs::path(fornace::test_paths::build()) / ("setup-test-bin-" + std::to_string(locked_updates));
  fs::remove_all(bin);
  fs::create_directories(bin);
  std::ofstream(bin / "dpkg-query") << "#!/bin/sh\nexit 1\n";
  std::ofstream(bin / "apt-get")
      << "#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/calls\"\n"
      << "if [ \"$3\" = update ]; then\n"
      << "  if [ \"$(grep -c update \"$(dirname \"$0\")/calls\")\" -le " << locked_updates
      << " ]; then echo '" << update_error << "' >&2; exit 100; fi\nfi\nexit 0\n";
  for (const char* tool : {"dpkg-query", "apt-get"}) {
    fs::permissions(bin / tool, fs::perms::owner_all, fs::perm_options::add);
  }
  return run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                             " && PATH=" + bin.string() +
                             ":$PATH FORNACE_APT_LOCK_POLL=0 FORNACE_APT_LOCK_TIMEOUT=60 bash "
                             "scripts/setup.sh >{out} 2>{err} </dev/null; status=$?; cat " +
                             (bin / "calls").string() + " >>{err}; exit $status");
}

TEST(SetupScript, WaitsForAnotherAptProcessesLockInsteadOfFailing) {
  Outcome outcome = run_setup_with_locked_lists(
      2, "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("another apt process holds the package lists"), std::string::npos)
      << outcome.out;
  // Three updates (two locked), then the install with dpkg's lock timeout.
  EXPECT_NE(outcome.err.find("DPkg::Lock::Timeout=60 install"), std::string::npos) << outcome.err;
}

TEST(SetupScript, AnUpdateThatFailsForAnotherReasonIsOneErrorLine) {
  Outcome outcome = run_setup_with_locked_lists(99, "E: The repository is not signed");
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_NE(outcome.err.find("error: setup: apt-get update failed"), std::string::npos)
      << outcome.err;
}

}  // namespace
}  // namespace fornace
