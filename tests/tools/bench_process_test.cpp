// Tests of fornace-bench as a process: argument checks before any child starts, several models
// and attention paths, a child that crashes or is killed, atomic CSV writes, Ctrl-C, and
// `report` rebuilding the outputs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/run_fornace.h"
#include "common/test_models.h"
// The CSV reader's definitions are compiled into this executable by bench_units_test.cpp.
#include "../../tools/fornace-bench/csv.h"
#include "common/source_paths.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kBench = fornace::test_paths::build("bin/fornace-bench");
const std::string kFornace = fornace::test_paths::build("bin/fornace");
// A guard against a hung process, not a timing check: far beyond what any case needs.
constexpr auto kHangGuard = std::chrono::seconds(300);

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

size_t count_lines_starting_with(const std::string& text, const std::string& prefix) {
  size_t count = 0;
  std::stringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) count += line.rfind(prefix, 0) == 0;
  return count;
}

size_t count_lines(const std::string& text) {
  size_t count = 0;
  for (char character : text) count += character == '\n';
  return count;
}

// A process started with stdout and stderr going to files, and extra environment variables.
struct Process {
  pid_t pid = -1;
  fs::path stdout_path;
  fs::path stderr_path;

  std::string out() const { return read_text(stdout_path); }
  std::string err() const { return read_text(stderr_path); }
};

Process start(const std::vector<std::string>& arguments, const fs::path& directory,
              const std::vector<std::string>& extra_environment = {}) {
  static int counter = 0;
  Process process;
  ++counter;
  process.stdout_path = directory / ("stdout." + std::to_string(counter));
  process.stderr_path = directory / ("stderr." + std::to_string(counter));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, process.stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, process.stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> environment;
  for (char** variable = environ; *variable; ++variable) {
    if (std::string(*variable).rfind("FORNACE_BENCH_TEST_FAULT=", 0) != 0) {
      environment.push_back(*variable);
    }
  }
  environment.insert(environment.end(), extra_environment.begin(), extra_environment.end());
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& variable : environment)
    envp.push_back(const_cast<char*>(variable.c_str()));
  envp.push_back(nullptr);
  int error =
      posix_spawn(&process.pid, arguments[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(error, 0) << "cannot start " << arguments[0];
  return process;
}

// The wait status, or -1 (after killing it) when the process outlives the hang guard.
int wait_for(const Process& process) {
  auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (true) {
    int status = 0;
    pid_t done = waitpid(process.pid, &status, WNOHANG);
    if (done == process.pid) return status;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(process.pid, SIGKILL);
      waitpid(process.pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int exit_code(int status) { return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// Waits until the process's stderr contains `text`; false if it exits or the guard passes first.
bool wait_for_stderr(const Process& process, const std::string& text) {
  auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process.err().find(text) != std::string::npos) return true;
    if (kill(process.pid, 0) != 0) return false;
    int status = 0;
    if (waitpid(process.pid, &status, WNOHANG) == process.pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The pid in the prefix "[<kind> pid N] " of a child's stderr line.
pid_t child_pid_from(const std::string& stderr_text, const std::string& kind) {
  std::string prefix = "[" + kind + " pid ";
  size_t at = stderr_text.find(prefix);
  if (at == std::string::npos) return -1;
  return static_cast<pid_t>(std::atol(stderr_text.c_str() + at + prefix.size()));
}

std::vector<std::string> temporary_files_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    std::string name = entry.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) names.push_back(name);
  }
  return names;
}

class BenchProcess : public ::testing::Test {
 protected:
  // One tiny synthetic model for the whole suite.
  static void SetUpTestSuite() {
    model_ = new fs::path(fs::temp_directory_path() /
                          ("fornace-bench-test-model-" + std::to_string(getpid())));
    fs::remove_all(*model_);
    std::string command = kFornace + " synth --preset tiny --out " + model_->string() +
                          " --tokenizer-dir " + fornace::test_paths::source() +
                          "/models > /dev/null";
    synth_status_ = std::system(command.c_str());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*model_);
    delete model_;
    model_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(synth_status_, 0) << "fornace synth --preset tiny failed";
    char pattern[] = "/tmp/fornace-bench-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    prompt_ = directory_ / "prompt.ids";
    std::ofstream(prompt_) << "9707 11 1879 374 264 1273 13 1096 374 1172\n";
    out_ = directory_ / "runs" / "result.csv";
  }
  void TearDown() override { fs::remove_all(directory_); }

  // The bench on the tiny model: small runs, the read bandwidth given rather than measured.
  std::vector<std::string> bench_arguments(const std::string& kinds, int64_t runs = 2) const {
    return {kBench,
            "--model",
            model_->string(),
            "--kv-cache",
            kinds,
            "--prompts",
            prompt_.string(),
            "--runs",
            std::to_string(runs),
            "--warmup",
            "0",
            "--max-new-tokens",
            "4",
            "--threads",
            "1",
            "--read-bandwidth",
            "10",
            "--out",
            out_.string()};
  }

  static fs::path* model_;
  static int synth_status_;
  fs::path directory_;
  fs::path prompt_;
  fs::path out_;
};

fs::path* BenchProcess::model_ = nullptr;
int BenchProcess::synth_status_ = -1;

TEST_F(BenchProcess, MissingPromptFileIsOneErrorLineBeforeAnyChildStarts) {
  std::vector<std::string> arguments = bench_arguments("prealloc");
  std::string missing = (directory_ / "no-such-prompt.txt").string();
  arguments[6] = prompt_.string() + "," + missing;
  Process bench = start(arguments, directory_);
  EXPECT_EQ(exit_code(wait_for(bench)), 1);
  std::string err = bench.err();
  EXPECT_EQ(count_lines(err), 1u) << err;
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_NE(err.find(missing), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(BenchProcess, UnknownKvCacheKindIsAUsageErrorBeforeAnyChildStarts) {
  Process bench = start(bench_arguments("prealloc,contiguous-ish"), directory_);
  EXPECT_EQ(exit_code(wait_for(bench)), 2);
  std::string err = bench.err();
  EXPECT_EQ(count_lines(err), 1u) << err;
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_NE(err.find("contiguous-ish"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(BenchProcess, WritesRunsStepsTablesAndPlotForEveryCacheAndPrompt) {
  std::vector<std::string> arguments = bench_arguments("prealloc,cat,cat-contiguous");
  fs::path text_prompt = directory_ / "text.txt";
  std::ofstream(text_prompt) << "Alice was beginning to get very tired of sitting by her sister.";
  arguments[6] = prompt_.string() + "," + text_prompt.string();
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  std::string runs = read_text(out_);
  EXPECT_EQ(runs.rfind("kv_cache,prompt,prompt_tokens,run,prefill_ms,decode_tok_s,", 0), 0u);
  // 3 caches x 2 prompts x 2 runs.
  EXPECT_EQ(count_lines(runs), 1u + 12u);
  EXPECT_EQ(count_lines_starting_with(runs, "cat," + prompt_.string() + ",10,"), 2u) << runs;
  EXPECT_EQ(count_lines_starting_with(runs, "cat-contiguous," + text_prompt.string() + ","), 2u);
  std::string steps = read_text(directory_ / "runs" / "result-steps.csv");
  // 4 new tokens: the first comes from prefill, then 3 decode steps at positions 10, 11, 12.
  EXPECT_EQ(count_lines(steps), 1u + 12u * 3u);
  EXPECT_EQ(count_lines_starting_with(steps, "prealloc," + prompt_.string() + ",1,2,12,"), 1u);
  std::string markdown = read_text(directory_ / "runs" / "result.md");
  EXPECT_NE(markdown.find("### " + model_->filename().string() +
                          " \u00b7 prompt.ids: 10 prompt tokens, 4 new tokens"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| `cat-contiguous` "), std::string::npos);
  EXPECT_NE(bench.out().find("| `prealloc` "), std::string::npos);
  EXPECT_NE(read_text(directory_ / "runs" / "result.svg").find("</svg>"), std::string::npos);
  EXPECT_TRUE(temporary_files_in(directory_ / "runs").empty());
}

TEST_F(BenchProcess, RoundsLetTheCachesTakeTurnsAndNumberTheRunsOn) {
  std::vector<std::string> arguments = bench_arguments("prealloc,cat", 1);
  arguments.push_back("--rounds");
  arguments.push_back("2");
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  // Children in turn, in the order of the runs CSV: prealloc, cat, prealloc, cat.
  std::vector<std::string> rows;
  std::stringstream runs(read_text(out_));
  for (std::string line; std::getline(runs, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 1u + 4u);
  const char* expected[] = {"prealloc,", "cat,", "prealloc,", "cat,"};
  for (size_t run = 0; run < 4; ++run) {
    std::string start = expected[run] + prompt_.string() + ",10," + std::to_string(run / 2 + 1);
    EXPECT_EQ(rows[run + 1].rfind(start + ",", 0), 0u) << rows[run + 1];
  }
}

TEST_F(BenchProcess, ReportRebuildsTheSameTablesAndPlotFromTheCsvs) {
  Process bench = start(bench_arguments("prealloc,cat"), directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  fs::path markdown = directory_ / "runs" / "result.md";
  fs::path svg = directory_ / "runs" / "result.svg";
  std::string markdown_from_bench = read_text(markdown);
  std::string svg_from_bench = read_text(svg);
  fs::remove(markdown);
  fs::remove(svg);
  Process report = start({kBench, "report", out_.string()}, directory_);
  ASSERT_EQ(exit_code(wait_for(report)), 0) << report.err();
  EXPECT_EQ(read_text(markdown), markdown_from_bench);
  EXPECT_EQ(read_text(svg), svg_from_bench);
  EXPECT_EQ(report.out(), bench.out());
}

TEST_F(BenchProcess, CrashedChildIsNamedWithItsStderrAndTheOtherCachesAreKept) {
  Process bench =
      start(bench_arguments("cat,prealloc"), directory_, {"FORNACE_BENCH_TEST_FAULT=abort:cat"});
  EXPECT_EQ(exit_code(wait_for(bench)), 1);
  std::string err = bench.err();
  EXPECT_NE(err.find("error: the cat child (pid "), std::string::npos) << err;
  EXPECT_NE(err.find("killed by signal " + std::to_string(SIGABRT)), std::string::npos) << err;
  EXPECT_NE(err.find("while running " + prompt_.string()), std::string::npos) << err;
  EXPECT_NE(err.find("| test fault (FORNACE_BENCH_TEST_FAULT): aborting"), std::string::npos)
      << err;
  std::string runs = read_text(out_);
  EXPECT_EQ(count_lines_starting_with(runs, "prealloc,"), 2u) << runs;
  EXPECT_EQ(count_lines_starting_with(runs, "cat,"), 1u) << runs;  // Its run before the crash.
  EXPECT_TRUE(temporary_files_in(directory_ / "runs").empty());
}

TEST_F(BenchProcess, KilledChildIsNamedAndTheOtherCachesAreKept) {
  Process bench =
      start(bench_arguments("cat,prealloc"), directory_, {"FORNACE_BENCH_TEST_FAULT=hang:cat"});
  ASSERT_TRUE(wait_for_stderr(bench, "hanging")) << bench.err();
  pid_t child = child_pid_from(bench.err(), "cat");
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  EXPECT_EQ(exit_code(wait_for(bench)), 1);
  std::string err = bench.err();
  EXPECT_NE(err.find("error: the cat child (pid " + std::to_string(child) +
                     ") was killed by signal " + std::to_string(SIGKILL)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(prompt_.string()), std::string::npos) << err;
  EXPECT_EQ(count_lines_starting_with(read_text(out_), "prealloc,"), 2u);
}

TEST_F(BenchProcess, FailedCsvWriteLeavesTheExistingFileWholeAndNoTemporary) {
  fs::create_directories(out_.parent_path());
  std::ofstream(out_) << "an earlier bench's results\n";
  Process bench =
      start(bench_arguments("prealloc"), directory_, {"FORNACE_BENCH_TEST_FAULT=fail-write"});
  EXPECT_EQ(exit_code(wait_for(bench)), 1);
  EXPECT_NE(bench.err().find("error: writing " + out_.string()), std::string::npos) << bench.err();
  EXPECT_EQ(read_text(out_), "an earlier bench's results\n");
  EXPECT_TRUE(temporary_files_in(out_.parent_path()).empty());
}

TEST_F(BenchProcess, InterruptStopsTheRunningChildAndWritesNothing) {
  Process bench =
      start(bench_arguments("cat,prealloc"), directory_, {"FORNACE_BENCH_TEST_FAULT=hang:cat"});
  ASSERT_TRUE(wait_for_stderr(bench, "hanging")) << bench.err();
  pid_t child = child_pid_from(bench.err(), "cat");
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(bench.pid, SIGINT), 0);
  int status = wait_for(bench);
  ASSERT_NE(status, -1) << "the bench did not stop after SIGINT";
  EXPECT_NE(exit_code(status), 0);
  EXPECT_EQ(kill(child, 0), -1) << "the child is still there";
  EXPECT_EQ(errno, ESRCH);
  std::string err = bench.err();
  EXPECT_NE(err.find("error: interrupted"), std::string::npos) << err;
  // The prealloc child never started, so no message names it.
  EXPECT_EQ(err.find("prealloc"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out_));
}

// What a process did, for expect_error.
fornace::Outcome outcome_of(const Process& process) {
  return {exit_code(wait_for(process)), process.out(), process.err()};
}

TEST_F(BenchProcess, NoArgumentsIsAUsageError) {
  fornace::expect_error(outcome_of(start({kBench}, directory_)), 2, "--model is required");
}

TEST_F(BenchProcess, HelpDocumentsEveryFlagOnStdout) {
  fornace::Outcome help = outcome_of(start({kBench, "--help"}, directory_));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.err, "");
  for (const char* flag : {"--model", "--attention", "--kv-cache", "--cache-type", "--prompts",
                           "--runs", "--rounds", "--warmup", "--max-new-tokens", "--threads",
                           "--dtype", "--out", "--read-bandwidth", "--quiet"}) {
    EXPECT_NE(help.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
  EXPECT_NE(help.out.find("recorded runs per prompt (default: 3)"), std::string::npos) << help.out;
}

TEST_F(BenchProcess, ReportWithoutACsvIsAUsageError) {
  fornace::expect_error(outcome_of(start({kBench, "report"}, directory_)), 2, "RUNS.csv");
  fornace::Outcome help = outcome_of(start({kBench, "report", "--help"}, directory_));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: fornace-bench report RUNS.csv"), std::string::npos);
}

// The roofs alone, for the load benchmark: one JSON line with both measured (positive, finite).
TEST_F(BenchProcess, RoofsPrintsTheReadBandwidthAndThePeakAsOneJsonLine) {
  fornace::Outcome roofs = outcome_of(start({kBench, "roofs", "--threads", "1"}, directory_));
  ASSERT_EQ(roofs.exit_code, 0) << roofs.err;
  EXPECT_EQ(count_lines(roofs.out), 1u) << roofs.out;
  const nlohmann::json line = nlohmann::json::parse(roofs.out);
  EXPECT_GT(line.at("read_gbs").get<double>(), 0.0);
  EXPECT_LT(line.at("read_gbs").get<double>(), 1e4);
  EXPECT_GE(line.at("peak_gflops").get<double>(), 0.0);  // 0 without AVX512_BF16.
  EXPECT_EQ(line.at("threads").get<int64_t>(), 1);
  EXPECT_FALSE(line.at("cpu").get<std::string>().empty());
  fornace::expect_error(outcome_of(start({kBench, "roofs", "--threads", "0"}, directory_)), 2,
                        "--threads: expects an integer in [1, 1024], got '0'");
}

TEST_F(BenchProcess, OutOfRangeValueNamesTheFlagAndTheRangeBeforeAnyChildStarts) {
  std::vector<std::string> arguments = bench_arguments("prealloc");
  arguments.push_back("--runs=0");
  fornace::expect_error(outcome_of(start(arguments, directory_)), 2,
                        "--runs: expects an integer in [1, 1000], got '0'");
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(BenchProcess, FlagsTakeTheirValuesAfterAnEqualsSign) {
  std::vector<std::string> arguments = {kBench,
                                        "--model=" + model_->string(),
                                        "--kv-cache=cat",
                                        "--prompts=" + prompt_.string(),
                                        "--runs=1",
                                        "--warmup=0",
                                        "--max-new-tokens=3",
                                        "--threads=1",
                                        "--read-bandwidth=10",
                                        "--out=" + out_.string()};
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  EXPECT_EQ(count_lines(read_text(out_)), 2u);
}

// The rows of a CSV file whose `column` holds `value`, as row indices.
std::vector<size_t> rows_where(const fornace::bench::CsvTable& table, const std::string& column,
                               const std::string& value) {
  std::vector<size_t> rows;
  for (size_t row = 0; row < table.rows(); ++row) {
    if (table.text(row, column) == value) rows.push_back(row);
  }
  return rows;
}

TEST_F(BenchProcess, TwoModelsAndBothAttentionPathsWriteRowsForEach) {
  const std::string tiny = fornace::synthetic_model_directory("tiny", fornace::DType::f32);
  const std::string llama = fornace::synthetic_model_directory("tiny-llama", fornace::DType::f32);
  std::vector<std::string> arguments = bench_arguments("cat,prealloc", 1);
  arguments[2] = tiny + "," + llama;
  arguments.push_back("--attention=fused,candle");
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();

  using fornace::bench::CsvTable;
  CsvTable runs = CsvTable::parse(read_text(out_), out_.string());
  ASSERT_EQ(runs.rows(), 8u);
  // Children in turns, in the order of the runs CSV: model, then path, then cache.
  for (auto [row, what] : {std::pair<size_t, const char*>{0, "tiny-f32 fused cat"},
                           {3, "tiny-f32 candle prealloc"},
                           {4, "tiny-llama-f32 fused cat"},
                           {7, "tiny-llama-f32 candle prealloc"}}) {
    EXPECT_EQ(runs.text(row, "model") + " " + runs.text(row, "attention") + " " +
                  runs.text(row, "kv_cache"),
              what)
        << row;
  }
  fs::path steps_path = directory_ / "runs" / "result-steps.csv";
  CsvTable steps = CsvTable::parse(read_text(steps_path), steps_path.string());
  ASSERT_EQ(steps.rows(), 8u * 3u);
  std::string markdown = read_text(directory_ / "runs" / "result.md");
  for (const auto& [label, directory] : {std::pair{"tiny-f32", tiny}, {"tiny-llama-f32", llama}}) {
    EXPECT_NE(markdown.find(std::string("### ") + label + " \u00b7 prompt.ids: 10 prompt tokens"),
              std::string::npos)
        << markdown;
    for (const char* attention : {"fused", "candle"}) {
      for (const char* kind : {"cat", "prealloc"}) {
        size_t matching = 0;
        for (size_t row : rows_where(runs, "model", label)) {
          if (runs.text(row, "attention") != attention || runs.text(row, "kv_cache") != kind) {
            continue;
          }
          ++matching;
          EXPECT_EQ(runs.text(row, "model_dir"), directory);
        }
        EXPECT_EQ(matching, 1u) << label << " " << attention << " " << kind;
      }
    }
  }
  // The runs CSV sums the steps' strided copies (3 decode steps a run), and the path reaches the
  // child: Candle's repeat_kv copies more, strided, than the fused path does with the same cache.
  std::map<std::string, double> strided_of;  // By "model attention cache".
  for (size_t row = 0; row < runs.rows(); ++row) {
    double strided = 0;
    double strided_runs = 0;
    for (size_t step = 0; step < steps.rows(); ++step) {
      if (steps.text(step, "model") != runs.text(row, "model") ||
          steps.text(step, "attention") != runs.text(row, "attention") ||
          steps.text(step, "kv_cache") != runs.text(row, "kv_cache")) {
        continue;
      }
      strided += steps.number(step, "copied_strided_bytes");
      strided_runs += steps.number(step, "strided_runs");
    }
    std::string what = runs.text(row, "model") + " " + runs.text(row, "attention") + " " +
                       runs.text(row, "kv_cache");
    strided_of[what] = strided;
    EXPECT_NEAR(runs.number(row, "mean_strided_bytes_last64"), strided / 3, 0.05) << what;
    EXPECT_NEAR(runs.number(row, "bytes_per_run_last64"),
                strided_runs > 0 ? strided / strided_runs : 0.0, 0.05)
        << what;
  }
  for (const char* label : {"tiny-f32", "tiny-llama-f32"}) {
    for (const char* kind : {"cat", "prealloc"}) {
      std::string model = label;
      EXPECT_GT(strided_of[model + " candle " + kind], strided_of[model + " fused " + kind])
          << model << " " << kind;
    }
  }
}

TEST_F(BenchProcess, BytesPerTokenOfASlidingWindowModelFollowWhatAttentionReads) {
  const std::string gemma = fornace::synthetic_model_directory("tiny-gemma3", fornace::DType::f32);
  std::vector<std::string> arguments = bench_arguments("cat", 1);
  arguments[2] = gemma;
  arguments[12] = "6";  // --max-new-tokens: 5 decode steps after the 10-token prompt.
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  using fornace::bench::CsvTable;
  CsvTable runs = CsvTable::parse(read_text(out_), out_.string());
  ASSERT_EQ(runs.rows(), 1u);
  // Three layers, the first two local with a window of 8; K and V of one position of one layer
  // are 2 x 2 heads x 32 x 4 bytes. Steps read 11 to 15 positions: 13 on average on the global
  // layer, 8 on each local one, where a full cache would read 3 x 13.
  const double per_position = 2 * 2 * 32 * 4;
  EXPECT_EQ(runs.integer(0, "kv_bytes_per_position"), 3 * 512);
  EXPECT_DOUBLE_EQ(runs.number(0, "kv_bytes_per_token"), (8 + 8 + 13) * per_position);
  // The same as the K and V bytes that attention reported reading, step by step.
  fs::path steps_path = directory_ / "runs" / "result-steps.csv";
  CsvTable steps = CsvTable::parse(read_text(steps_path), steps_path.string());
  ASSERT_EQ(steps.rows(), 5u);
  for (size_t step = 0; step < steps.rows(); ++step) {
    double positions = static_cast<double>(steps.integer(step, "position") + 1);
    EXPECT_EQ(steps.number(step, "kv_read_bytes"), (8 + 8 + positions) * per_position) << step;
  }
}

// One child per cache type: the CSVs carry the type, the bytes per position and per token are
// those the type stores (Gemma 3's tiny model: K and V of a position of a layer are 2 x 2 heads
// x a row of 32 values: 128 bytes f32, 64 bf16, Q8_0's 34 padded to 36), and the table names
// each cache with its type.
TEST_F(BenchProcess, EachCacheTypeIsAChildAndTheCsvsCarryItsBytes) {
  const std::string gemma = fornace::synthetic_model_directory("tiny-gemma3", fornace::DType::f32);
  std::vector<std::string> arguments = bench_arguments("prealloc", 1);
  arguments[2] = gemma;
  arguments[12] = "6";  // --max-new-tokens: 5 decode steps after the 10-token prompt.
  arguments.push_back("--cache-type=bf16,q8_0");
  Process bench = start(arguments, directory_);
  ASSERT_EQ(exit_code(wait_for(bench)), 0) << bench.err();
  using fornace::bench::CsvTable;
  CsvTable runs = CsvTable::parse(read_text(out_), out_.string());
  ASSERT_EQ(runs.rows(), 2u);
  for (auto [row, type, row_bytes] :
       {std::tuple<size_t, const char*, int>{0, "bf16", 64}, {1, "q8_0", 36}}) {
    EXPECT_EQ(runs.text(row, "cache_type"), type);
    const double per_position = 2 * 2 * row_bytes;
    EXPECT_EQ(runs.integer(row, "kv_bytes_per_position"), 3 * per_position) << type;
    EXPECT_DOUBLE_EQ(runs.number(row, "kv_bytes_per_token"), (8 + 8 + 13) * per_position) << type;
  }
  fs::path steps_path = directory_ / "runs" / "result-steps.csv";
  CsvTable steps = CsvTable::parse(read_text(steps_path), steps_path.string());
  EXPECT_EQ(rows_where(steps, "cache_type", "q8_0").size(), 5u);
  std::string markdown = read_text(directory_ / "runs" / "result.md");
  EXPECT_NE(markdown.find("`prealloc q8_0`"), std::string::npos) << markdown;
}

TEST_F(BenchProcess, UnknownCacheTypeIsAUsageErrorBeforeAnyChildStarts) {
  std::vector<std::string> arguments = bench_arguments("prealloc");
  arguments.push_back("--cache-type=bf16,q3_k");
  fornace::expect_error(outcome_of(start(arguments, directory_)), 2,
                        "unknown KV cache type 'q3_k'");
}

TEST_F(BenchProcess, ReportReadsTheCsvsWrittenBeforeModelsAndPathsWereRecorded) {
  // A run of finding 0001, kept xz-compressed beside the finding.
  const fs::path recorded = fs::path(fornace::test_paths::source()) / "findings" / "0001";
  for (const std::string suffix : {"", "-steps"}) {
    fs::path compressed = recorded / ("2026-11-29-144cd57" + suffix + ".csv.xz");
    fs::path plain = directory_ / ("old" + suffix + ".csv");
    fornace::Outcome unpacked = fornace::run_shell_capturing("xz -dc " + compressed.string() +
                                                             " >" + plain.string() + " 2>{err}");
    ASSERT_EQ(unpacked.exit_code, 0) << unpacked.err;
  }
  Process report = start({kBench, "report", (directory_ / "old.csv").string()}, directory_);
  ASSERT_EQ(exit_code(wait_for(report)), 0) << report.err();
  std::string out = report.out();
  EXPECT_NE(out.find("### alice-512.txt: 513 prompt tokens, 128 new tokens"), std::string::npos)
      << out;
  EXPECT_NE(out.find("| `fused`   | `cat`            |"), std::string::npos) << out;
  std::string svg = read_text(directory_ / "old.svg");
  EXPECT_NE(svg.find("data-prompt=\"bench/prompts/alice-2048.txt\""), std::string::npos);
  EXPECT_NE(svg.find(">cat-contiguous</text>"), std::string::npos);
}

TEST_F(BenchProcess, UnknownOrRepeatedAttentionPathIsAUsageErrorBeforeAnyChildStarts) {
  std::vector<std::string> arguments = bench_arguments("prealloc");
  arguments.push_back("--attention=fused,flash");
  fornace::expect_error(outcome_of(start(arguments, directory_)), 2, "flash");
  arguments.back() = "--attention=candle,candle";
  fornace::expect_error(outcome_of(start(arguments, directory_)), 2, "lists candle twice");
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(BenchProcess, MissingSecondModelIsOneErrorLineBeforeAnyChildStarts) {
  std::vector<std::string> arguments = bench_arguments("prealloc");
  std::string missing = (directory_ / "no-such-model").string();
  arguments[2] = model_->string() + "," + missing;
  fornace::expect_error(outcome_of(start(arguments, directory_)), 1,
                        "model " + missing + " does not exist");
  EXPECT_FALSE(fs::exists(out_));
}

}  // namespace
