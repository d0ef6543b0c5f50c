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

TEST(BenchContextScript, MissingFornaceBenchIsAnError) {
  std::string build = fornace::test_paths::build("no-such-build");
  Outcome outcome = run_script("bench-context.sh", build);
  expect_error(outcome, 1, build + "/bin/fornace-bench is not built");
  EXPECT_EQ(outcome.out, "");
}

TEST(BenchContextScript, AnUnknownContextIsAnErrorThatNamesTheKnownOnes) {
  Outcome outcome =
      run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                          " && CONTEXTS=8k,64k bash scripts/bench-context.sh " +
                          fornace::test_paths::build() + " >{out} 2>{err} </dev/null");
  expect_error(outcome, 1, "no prompt bench/prompts/alice-64k.ids (CONTEXTS takes 8k, 16k, 32k)");
}

// context-table.py over one fornace-bench run and one llama.cpp run of the same prompt: the
// llama.cpp row takes fornace's roofs, weights' bytes and prefill GFLOP, and its own KV cache.
TEST(ContextTableScript, SharesOfTheRoofsForBothEnginesFromFornacesRoofs) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(fornace::test_paths::build()) / "context-table-test";
  fs::create_directories(dir);
  // 1,000 prompt tokens and 10 new: prefill 2 s, 100 GFLOP at a peak of 100 GFLOP/s (50 %);
  // decode 10 tok/s reading 9 MB of weights and 1 MB of KV at 1 GB/s (10 %).
  std::ofstream(dir / "fornace.csv")
      << "kv_cache,prompt,prompt_tokens,run,prefill_ms,decode_tok_s,peak_mib,decode_steps,"
         "weight_bytes,kv_bytes_per_position,kv_bytes_per_token,prefill_gflop,run_read_gbs,"
         "run_peak_gflops\n"
      << "prealloc,p.ids,1000,1,2000,10,500,9,9000000,1048,1000000,100,1,100\n";
  // llama.cpp: prefill 4 s (25 %); 1,024 cells of 1,024 bytes (1 MiB), so a step reads 1,000 +
  // 5 positions on average: (9,000,000 + 1,029,120) B x 5 tok/s of 1 GB/s is 5 %.
  std::ofstream(dir / "llamacpp.csv")
      << "engine,model,kv_cache_type,prompt,prompt_tokens,run,prefill_ms,prefill_tok_s,"
         "decode_tok_s,decode_steps,context_size,kv_mib,peak_mib\n"
      << "llama.cpp,m.gguf,f16,p.ids,1000,1,4000,250,5,9,1024,1,600\n";
  std::ofstream(dir / "manifest.tsv")
      << "fornace\tbf16\tf16\t" << (dir / "fornace.csv").string() << "\nllama.cpp\tbf16\tf16\t"
      << (dir / "llamacpp.csv").string() << "\n";
  Outcome outcome = run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                                        " && python3 scripts/context-table.py " +
                                        (dir / "manifest.tsv").string() + " >{out} 2>{err}");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("| 1,000 | fornace | bf16 | f16 | 1 | 500.0 | 50 % | 10.00 | 10 % | 1 "
                             "| 500 |"),
            std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("| 1,000 | llama.cpp | bf16 | f16 | 1 | 250.0 | 25 % | 5.00 | 5 % | 1 "
                             "| 600 |"),
            std::string::npos)
      << outcome.out;
}

TEST(ContextTableScript, AMissingManifestIsOneErrorLine) {
  Outcome outcome = run_shell_capturing(std::string("cd ") + fornace::test_paths::source() +
                                        " && python3 scripts/context-table.py /nonexistent.tsv "
                                        ">{out} 2>{err}");
  expect_error(outcome, 1, "/nonexistent.tsv");
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
  std::ofstream(bin / "apt-get") << "#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/calls\"\n"
                                 << "if [ \"$3\" = update ]; then\n"
                                 << "  if [ \"$(grep -c update \"$(dirname \"$0\")/calls\")\" -le "
                                 << locked_updates << " ]; then echo '" << update_error
                                 << "' >&2; exit 100; fi\nfi\nexit 0\n";
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
