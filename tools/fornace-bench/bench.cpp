// The parent: checks everything, measures the read bandwidth, runs one child process per model,
// attention path and KV cache, shows their progress on a terminal, and writes the outputs.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "common/cli.h"
#include "common/progress.h"
#include "core/dtype.h"
#include "cpu/kernel_choices.h"
#include "roofs/probes.h"
#include "cpu/thread_pool.h"
#include "format.h"
#include "io/config.h"
#include "models/model.h"
#include "machine.h"
#include "nn/kv_cache.h"
#include "outputs.h"
#include "prompts.h"
#include "summary.h"

extern char** environ;

namespace fornace::bench {
namespace {

constexpr size_t kStderrTailLines = 20;
constexpr size_t kBandwidthBytes = size_t{1} << 30;
constexpr int kBandwidthPasses = 5;

// Set by SIGINT and SIGTERM; the handler also writes a byte to a pipe that the child loop polls.
volatile sig_atomic_t interrupted = 0;
int signal_pipe_write = -1;

void on_stop_signal(int) {
  interrupted = 1;
  if (signal_pipe_write >= 0) {
    char byte = 1;
    ssize_t ignored = write(signal_pipe_write, &byte, 1);
    (void)ignored;
  }
}

// Installs the SIGINT and SIGTERM handlers for its lifetime.
class StopSignals {
 public:
  StopSignals() {
    if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) fail("pipe: ", std::strerror(errno));
    signal_pipe_write = pipe_[1];
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_interrupt_);
    sigaction(SIGTERM, &action, &previous_terminate_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &previous_interrupt_, nullptr);
    sigaction(SIGTERM, &previous_terminate_, nullptr);
    signal_pipe_write = -1;
    close(pipe_[0]);
    close(pipe_[1]);
  }
  int read_descriptor() const { return pipe_[0]; }

 private:
  int pipe_[2] = {-1, -1};
  struct sigaction previous_interrupt_ {};
  struct sigaction previous_terminate_ {};
};

struct BenchPlan : RunFlags {
  std::vector<std::string> models;        // Directories.
  std::vector<std::string> model_labels;  // What the tables call each model.
  std::vector<std::string> attentions;
  std::vector<std::string> kinds;
  std::vector<std::string> cache_types;  // {""}: the model's own.
  std::vector<std::string> prompts;
  int64_t rounds = 1;
  double read_gbs = 0;  // 0: measure it.
  std::string out;
  bool quiet = false;
};

// What one child runs: a model, an attention path and a KV cache.
struct ChildSpec {
  std::string model_directory;
  std::string model;  // Its label.
  std::string attention;
  std::string kind;
  std::string cache_type;  // Empty: the model's own.
  // How messages name the child: the parts that vary between the bench's children, the cache
  // always ("cat" alone when one model and one path are measured).
  std::string name;
};

// The children of one round, model by model, then path by path, then cache by cache.
std::vector<ChildSpec> child_specs(const BenchPlan& plan) {
  std::vector<ChildSpec> specs;
  for (size_t model = 0; model < plan.models.size(); ++model) {
    for (const std::string& attention : plan.attentions) {
      for (const std::string& kind : plan.kinds) {
        for (const std::string& cache_type : plan.cache_types) {
          std::string name = cache_type.empty() ? kind : kind + " " + cache_type;
          if (plan.attentions.size() > 1) name = attention + " " + name;
          if (plan.models.size() > 1) name = plan.model_labels[model] + " " + name;
          specs.push_back(
              {plan.models[model], plan.model_labels[model], attention, kind, cache_type, name});
        }
      }
    }
  }
  return specs;
}

// What one child did: its outcome and where it was.
struct ChildOutcome {
  ChildSpec spec;
  pid_t pid = -1;
  bool finished = false;     // Reported "done" and exited 0.
  bool interrupted = false;  // Stopped because the bench got SIGINT or SIGTERM.
  std::string prompt;        // The prompt it was running, if any.
  std::string stage = "loading the model";
  bool reported_done = false;
  std::string failure;  // One line, when it did not finish.
  std::deque<std::string> stderr_tail;
  int64_t run_offset = 0;    // Recorded runs of this cache in earlier rounds.
  int64_t weight_bytes = 0;  // From the child's "loaded" event.
  int64_t kv_bytes_per_position = 0;
  std::string cache_type;  // What the child's KV cache stores ("bf16", "q8_0", ...).
  // Where the current run is, for the progress line.
  bool running = false;
  int64_t runs_begun = 0;  // Warm-up and recorded runs started, all prompts together.
  int64_t prefill_done = 0;
  int64_t prefill_total = 0;
  int64_t generated = 0;  // New tokens so far.
  double tokens_per_second = 0;
};

// "45 s", "6 min", "2 h 5 min".
std::string duration_text(double seconds) {
  if (seconds < 59.5) return concat(std::llround(seconds), " s");
  int64_t minutes = std::llround(seconds / 60);
  if (minutes < 60) return concat(minutes, " min");
  return concat(minutes / 60, " h ", minutes % 60, " min");
}

// The bench's one updating line on a terminal (none under a pipe or --quiet): the child and what
// it runs, the run and its token, decode's rate, and the time left. The time left assumes that
// every run to come takes as long as the mean of those done so far, counted from the first
// child's start (its load included), every prompt's runs alike. Lines printed through it go
// above the progress line.
class BenchProgress {
 public:
  BenchProgress(const BenchPlan& plan, int64_t children)
      : line_(plan.quiet),
        quiet_(plan.quiet),
        children_(children),
        runs_per_child_(static_cast<int64_t>(plan.prompts.size()) * (plan.warmup + plan.runs)),
        max_new_tokens_(plan.max_new_tokens) {}

  bool shown() const { return line_.enabled(); }

  // Before the children: what the bench measures now.
  void measuring(const std::string& what) { draw("bench: measuring " + what, true); }

  // Child `index` (from 0, over every round) starts.
  void child_started(int64_t index) {
    child_ = index;
    if (index == 0) first_child_start_ = std::chrono::steady_clock::now();
  }

  void update(const ChildOutcome& child, bool always = false) {
    if (!shown()) return;
    const ChildSpec& spec = child.spec;
    std::string text = concat("bench: child ", child_ + 1, " of ", children_, " (", spec.model,
                              ", ", spec.attention, ", ", spec.kind, "): ");
    if (child.prompt.empty()) {
      text += child.stage;
    } else {
      text += path_file_name(child.prompt) + ", " + child.stage;
      if (child.running && child.generated > 0) {
        text += concat(", token ", child.generated, " of ", max_new_tokens_);
        if (child.tokens_per_second > 0) {
          text += ", " + group_thousands(format_fixed(child.tokens_per_second, 0)) + " tok/s";
        }
      } else if (child.running && child.prefill_total > 0) {
        text += concat(", prefill ", with_thousands(child.prefill_done), " of ",
                       with_thousands(child.prefill_total), " tokens");
      }
    }
    double runs_done =
        static_cast<double>(child_ * runs_per_child_ + std::max<int64_t>(0, child.runs_begun - 1)) +
        static_cast<double>(child.generated) / max_new_tokens_;
    if (runs_done >= 1) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - first_child_start_)
              .count();
      double runs_left = static_cast<double>(children_ * runs_per_child_) - runs_done;
      text += ", " + duration_text(seconds / runs_done * std::max(0.0, runs_left)) + " left";
    }
    draw(text, always);
  }

  // A line on stderr, shown in every mode: the progress line is erased first and drawn again.
  void print(const std::string& line) {
    line_.clear();
    std::cerr << line << "\n" << std::flush;
    if (!text_.empty()) line_.show(text_, true);
  }
  // A line that informs rather than warns: none under --quiet.
  void note(const std::string& line) {
    if (!quiet_) print(line);
  }
  // Erases the line, before errors or the tables.
  void clear() {
    line_.clear();
    text_.clear();
  }

 private:
  void draw(const std::string& text, bool always) {
    if (!shown()) return;
    text_ = text;
    line_.show(text_, always);
  }

  tools::ProgressLine line_;
  bool quiet_;
  int64_t children_;
  int64_t runs_per_child_;
  int64_t max_new_tokens_;
  int64_t child_ = 0;
  std::chrono::steady_clock::time_point first_child_start_ = std::chrono::steady_clock::now();
  std::string text_;  // The line's text, drawn again after a printed line.
};

// Splits a byte stream into lines.
class LineBuffer {
 public:
  template <typename OnLine>
  void feed(const char* bytes, size_t count, OnLine&& on_line) {
    pending_.append(bytes, count);
    size_t start = 0;
    size_t newline;
    while ((newline = pending_.find('\n', start)) != std::string::npos) {
      on_line(pending_.substr(start, newline - start));
      start = newline + 1;
    }
    pending_.erase(0, start);
  }
  template <typename OnLine>
  void finish(OnLine&& on_line) {
    if (!pending_.empty()) on_line(pending_);
    pending_.clear();
  }

 private:
  std::string pending_;
};

std::string executable_path() {
  std::error_code error;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) fail("cannot find this executable through /proc/self/exe: ", error.message());
  return path.string();
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return concat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int number = WTERMSIG(status);
    const char* name = strsignal(number);
    return concat("was killed by signal ", number, " (", name ? name : "unknown", ")");
  }
  return concat("ended with wait status ", status);
}

void keep_tail(ChildOutcome& outcome, const std::string& line) {
  outcome.stderr_tail.push_back(line);
  while (outcome.stderr_tail.size() > kStderrTailLines) outcome.stderr_tail.pop_front();
}

// Applies one JSON line of the child's stdout to the outcome and the collected data.
void handle_event(const std::string& line, ChildOutcome& outcome, BenchData& data,
                  const BenchPlan& plan) {
  nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
  if (event.is_discarded() || !event.is_object() || !event.contains("event")) {
    keep_tail(outcome, "(stdout, not an event) " + line);
    return;
  }
  std::string name = event["event"].get<std::string>();
  if (name == "loaded") {
    // Models of different dtypes: the context names each, "bf16/f32".
    std::string dtype = event["dtype"].get<std::string>();
    if (data.context.dtype.empty()) {
      data.context.dtype = dtype;
    } else if (("/" + data.context.dtype + "/").find("/" + dtype + "/") == std::string::npos) {
      data.context.dtype += "/" + dtype;
    }
    outcome.weight_bytes = event["weight_bytes"].get<int64_t>();
    outcome.kv_bytes_per_position = event["kv_bytes_per_position"].get<int64_t>();
    outcome.cache_type = event["cache_type"].get<std::string>();
    outcome.stage = "loaded";
  } else if (name == "prompt") {
    outcome.prompt = event["prompt"].get<std::string>();
    outcome.stage = "preparing the prompt";
    outcome.running = false;
  } else if (name == "run_start") {
    outcome.running = true;
    ++outcome.runs_begun;
    outcome.prefill_done = outcome.prefill_total = outcome.generated = 0;
    outcome.tokens_per_second = 0;
    bool warmup = event["warmup"].get<bool>();
    outcome.stage = concat(warmup ? "warm-up " : "run ", event["run"].get<int64_t>(), " of ",
                           warmup ? plan.warmup : plan.runs);
  } else if (name == "prefill") {
    outcome.prefill_done = event["done"].get<int64_t>();
    outcome.prefill_total = event["total"].get<int64_t>();
  } else if (name == "token") {
    outcome.generated = event["generated"].get<int64_t>();
    outcome.tokens_per_second = event["tok_s"].get<double>();
  } else if (name == "run") {
    RunRecord run;
    run.model = outcome.spec.model;
    run.model_directory = outcome.spec.model_directory;
    run.attention = outcome.spec.attention;
    run.kv_cache = outcome.spec.kind;
    run.cache_type = outcome.cache_type;
    run.prompt = event["prompt"].get<std::string>();
    run.prompt_tokens = event["prompt_tokens"].get<int64_t>();
    run.run = outcome.run_offset + event["run"].get<int64_t>();
    run.prefill_ms = event["prefill_ms"].get<double>();
    run.decode_tok_s = event["decode_tok_s"].get<double>();
    run.mean_ms_last64 = event["mean_ms_last64"].get<double>();
    run.peak_mib = event["peak_mib"].get<double>();
    run.read_gbs = event["read_gbs"].get<double>();
    run.peak_gflops = event["peak_gflops"].get<double>();
    run.prefill_gflop = event["prefill_gflop"].get<double>();
    run.kv_bytes_per_token = event["kv_bytes_per_token"].get<double>();
    run.mean_strided_bytes_last64 = event["mean_strided_bytes_last64"].get<double>();
    run.bytes_per_run_last64 = event["bytes_per_run_last64"].get<double>();
    run.prefill_linear_gflop = event["prefill_linear_gflop"].get<double>();
    run.prefill_linear_ms = event["prefill_linear_ms"].get<double>();
    run.decode_linear_ms = event["decode_linear_ms"].get<double>();
    std::vector<double> step_ms = event["step_ms"].get<std::vector<double>>();
    std::vector<int64_t> contiguous = event["step_copied_contiguous"].get<std::vector<int64_t>>();
    std::vector<int64_t> strided = event["step_copied_strided"].get<std::vector<int64_t>>();
    std::vector<int64_t> strided_runs = event["step_strided_runs"].get<std::vector<int64_t>>();
    std::vector<int64_t> allocated = event["step_allocated"].get<std::vector<int64_t>>();
    std::vector<int64_t> kv_read = event["step_kv_read"].get<std::vector<int64_t>>();
    run.decode_steps = static_cast<int64_t>(step_ms.size());
    run.weight_bytes = outcome.weight_bytes;
    run.kv_bytes_per_position = outcome.kv_bytes_per_position;
    data.runs.push_back(run);
    for (size_t i = 0; i < step_ms.size(); ++i) {
      StepRecord step;
      step.model = run.model;
      step.attention = run.attention;
      step.kv_cache = run.kv_cache;
      step.cache_type = run.cache_type;
      step.prompt = run.prompt;
      step.run = run.run;
      step.step = static_cast<int64_t>(i);
      step.position = run.prompt_tokens + static_cast<int64_t>(i);
      step.ms = step_ms[i];
      step.copied_contiguous_bytes = i < contiguous.size() ? contiguous[i] : 0;
      step.copied_strided_bytes = i < strided.size() ? strided[i] : 0;
      step.strided_runs = i < strided_runs.size() ? strided_runs[i] : 0;
      step.allocated_bytes = i < allocated.size() ? allocated[i] : 0;
      step.kv_read_bytes = i < kv_read.size() ? kv_read[i] : 0;
      data.steps.push_back(step);
    }
    outcome.stage = concat("after run ", run.run - outcome.run_offset, " of ", plan.runs);
    outcome.generated = plan.max_new_tokens;
    outcome.running = false;
  } else if (name == "done") {
    outcome.reported_done = true;
    outcome.stage = "finishing";
  }
}

std::vector<std::string> child_arguments(const BenchPlan& plan, const ChildSpec& spec,
                                         bool report_progress) {
  RunFlags flags = plan;
  flags.model_directory = spec.model_directory;
  flags.attention = spec.attention;
  flags.kv_cache = spec.kind;
  flags.cache_type = spec.cache_type;
  std::vector<std::string> arguments = {"fornace-bench", "--child",
                                        "--parent-pid=" + std::to_string(getpid())};
  for (std::string& argument : run_flag_arguments(flags)) arguments.push_back(std::move(argument));
  if (report_progress) arguments.push_back("--progress");
  return arguments;
}

// Starts `executable` with stdin from /dev/null and stdout and stderr into new pipes, whose read
// ends are returned. Signals the parent catches or ignores are reset to their defaults.
pid_t spawn_child(const std::string& executable, const std::vector<std::string>& arguments,
                  int& stdout_read, int& stderr_read) {
  int stdout_pipe[2];
  int stderr_pipe[2];
  if (pipe2(stdout_pipe, O_CLOEXEC) != 0) fail("pipe: ", std::strerror(errno));
  if (pipe2(stderr_pipe, O_CLOEXEC) != 0) {
    close(stdout_pipe[0]);
    close(stdout_pipe[1]);
    fail("pipe: ", std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, stderr_pipe[1], 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigset_t no_mask;
  sigemptyset(&no_mask);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &no_mask);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int error = posix_spawn(&pid, executable.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(stdout_pipe[1]);
  close(stderr_pipe[1]);
  if (error != 0) {
    close(stdout_pipe[0]);
    close(stderr_pipe[0]);
    fail("cannot start ", executable, ": ", std::strerror(error));
  }
  stdout_read = stdout_pipe[0];
  stderr_read = stderr_pipe[0];
  return pid;
}

// Runs one child to its end, or until the bench is interrupted. Its results go into `data`, its
// events into the progress line; its stderr lines are shown on ours, prefixed with its name and
// pid.
ChildOutcome run_child_process(const BenchPlan& plan, const ChildSpec& spec, int64_t round,
                               const StopSignals& signals, BenchData& data,
                               BenchProgress& progress) {
  ChildOutcome outcome;
  outcome.spec = spec;
  outcome.run_offset = round * plan.runs;
  int stdout_read = -1;
  int stderr_read = -1;
  outcome.pid = spawn_child(executable_path(), child_arguments(plan, spec, progress.shown()),
                            stdout_read, stderr_read);
  std::string prefix = concat("[", spec.name, " pid ", outcome.pid, "] ");
  progress.update(outcome, true);
  LineBuffer stdout_lines;
  LineBuffer stderr_lines;
  auto on_stdout_line = [&](const std::string& line) {
    try {
      handle_event(line, outcome, data, plan);
      progress.update(outcome);
    } catch (const std::exception& error) {
      keep_tail(outcome, concat("(stdout, not understood: ", error.what(), ") ", line));
    }
  };
  auto on_stderr_line = [&](const std::string& line) {
    progress.print(prefix + line);
    keep_tail(outcome, line);
  };
  bool stdout_open = true;
  bool stderr_open = true;
  while ((stdout_open || stderr_open) && !interrupted) {
    pollfd descriptors[3] = {{stdout_open ? stdout_read : -1, POLLIN, 0},
                             {stderr_open ? stderr_read : -1, POLLIN, 0},
                             {signals.read_descriptor(), POLLIN, 0}};
    if (poll(descriptors, 3, -1) < 0) {
      if (errno == EINTR) continue;
      fail("poll: ", std::strerror(errno));
    }
    char buffer[65536];
    for (int index = 0; index < 2; ++index) {
      if (descriptors[index].revents == 0) continue;
      ssize_t count = read(descriptors[index].fd, buffer, sizeof buffer);
      if (count < 0 && errno == EINTR) continue;
      bool is_stdout = index == 0;
      if (count <= 0) {
        if (is_stdout) {
          stdout_lines.finish(on_stdout_line);
          stdout_open = false;
        } else {
          stderr_lines.finish(on_stderr_line);
          stderr_open = false;
        }
        continue;
      }
      if (is_stdout) {
        stdout_lines.feed(buffer, static_cast<size_t>(count), on_stdout_line);
      } else {
        stderr_lines.feed(buffer, static_cast<size_t>(count), on_stderr_line);
      }
    }
  }
  if (interrupted) {
    kill(outcome.pid, SIGKILL);
    outcome.interrupted = true;
  }
  close(stdout_read);
  close(stderr_read);
  int status = 0;
  while (waitpid(outcome.pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string where = outcome.prompt.empty()
                          ? outcome.stage
                          : concat("running ", outcome.prompt, " (", outcome.stage, ")");
  if (outcome.interrupted) {
    outcome.failure =
        concat("stopped the ", spec.name, " child (pid ", outcome.pid, ") while ", where);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && outcome.reported_done) {
    outcome.finished = true;
  } else {
    outcome.failure = concat("the ", spec.name, " child (pid ", outcome.pid, ") ",
                             describe_wait_status(status), " while ", where);
  }
  return outcome;
}

void print_failure(const ChildOutcome& outcome) {
  std::cerr << "error: " << outcome.failure << "\n";
  if (outcome.stderr_tail.empty()) {
    std::cerr << "  (its stderr was empty)\n";
    return;
  }
  std::cerr << "  last lines of its stderr:\n";
  for (const std::string& line : outcome.stderr_tail) std::cerr << "  | " << line << "\n";
}

constexpr const char* kUsage =
    "usage: fornace-bench --model DIR[,DIR...] --kv-cache KIND[,KIND...] --prompts FILE[,FILE...]\n"
    "                     [--attention PATH[,PATH...]] [options]\n"
    "       fornace-bench report RUNS.csv\n"
    "       fornace-bench roofs [--threads N]";

void add_bench_flags(tools::CommandLine& app, BenchPlan& plan) {
  using tools::integer_in;
  add_run_flags(app, plan);
  app.add_option("--rounds", plan.rounds,
                 "run the set of children N times, the models, paths and caches taking turns, so "
                 "that a drift in the machine's speed falls on every one alike; runs are numbered "
                 "on across rounds")
      ->type_name("N")
      ->transform(integer_in(1, 1000));
  app.add_option("--out", plan.out, "runs CSV; next to it go -steps.csv, .md and .svg")
      ->type_name("PATH.csv")
      ->default_str("runs/<YYYY-MM-DD>-<short commit>.csv at the git tree's top (ignored by git)");
  app.add_flag("--quiet", plan.quiet,
               "errors only on stderr: no progress line and no summary lines (the tables still "
               "go to stdout)");
  app.add_option("--read-bandwidth", plan.read_gbs,
                 "use this read bandwidth instead of measuring it (1 GiB, 5 passes)")
      ->type_name("GB/S")
      ->check(tools::number_in(1e-3, 1e6))
      ->default_str("measured");
}

// Every check that can fail before a child starts.
void validate_plan(const BenchPlan& plan) {
  namespace fs = std::filesystem;
  for (const std::string& model : plan.models) {
    require_model_path(model);
    model_config_at(model);
  }
  bool needs_tokenizer = false;
  for (const std::string& prompt : plan.prompts) {
    read_prompt_file(prompt);
    needs_tokenizer = needs_tokenizer || !is_ids_prompt(prompt);
  }
  for (const std::string& model : plan.models) {
    fs::path tokenizer = fs::path(model) / "tokenizer.json";
    if (needs_tokenizer && !is_gguf_path(model) && !fs::exists(tokenizer)) {
      fail(tokenizer.string(),
           " does not exist; text prompts need it (a .ids prompt file holds token ids instead)");
    }
  }
  fs::path out_directory = fs::path(plan.out).parent_path();
  if (!out_directory.empty()) {
    std::error_code error;
    fs::create_directories(out_directory, error);
    if (error || !fs::is_directory(out_directory)) {
      fail("cannot create the output directory ", out_directory.string(),
           error ? ": " + error.message() : std::string());
    }
  }
}

int run_bench(BenchPlan& plan) {
  auto start = std::chrono::steady_clock::now();
  BenchData data;
  GitState git = git_state();
  data.context.date = local_date();
  CpuIdentity cpu = cpu_identity();
  data.context.cpu = cpu.model_name;
  data.context.cpu_family = cpu.family;
  // The rounding of activations for quantized weights is the run's, not the process's.
  data.context.kernels = cpu::kernel_choices() + "; activations " + plan.activations;
  data.context.cpu_model = cpu.model;
  data.context.cores = available_cores();
  data.context.threads = plan.threads;
  data.context.commit = git.commit;
  data.context.dirty = git.dirty;
  if (plan.out.empty()) {
    std::filesystem::path runs = git.top_level.empty()
                                     ? std::filesystem::path("runs")
                                     : std::filesystem::path(git.top_level) / "runs";
    plan.out = (runs / (data.context.date + "-" + git.commit + ".csv")).string();
  }
  validate_plan(plan);
  OutputPaths paths = output_paths_for(plan.out);

  const std::vector<ChildSpec> specs = child_specs(plan);
  const int64_t per_round = static_cast<int64_t>(specs.size());
  const int64_t children = plan.rounds * per_round;
  BenchProgress progress(plan, children);

  set_num_threads(static_cast<int>(plan.threads));
  if (plan.read_gbs > 0) {
    data.context.read_gbs = plan.read_gbs;
  } else {
    progress.measuring(concat("the read bandwidth: 1 GiB, best of ", kBandwidthPasses, " passes, ",
                              plan.threads, " threads"));
    data.context.read_gbs = roofs::measure_read_bandwidth_gbs(kBandwidthBytes, kBandwidthPasses);
    progress.clear();
    progress.note("[bench] read bandwidth: " + format_fixed(data.context.read_gbs, 1) + " GB/s");
  }
  const std::string peak_name = roofs::gemm_peak_name(cpu::active_isa(), roofs::has_amx_dot());
  progress.measuring("the GEMM peak (" + peak_name + ")");
  data.context.peak_gflops = roofs::measure_gemm_peak_gflops(cpu::active_isa());
  progress.clear();
  if (data.context.peak_gflops > 0) {
    progress.note("[bench] GEMM peak (" + peak_name +
                  "): " + format_fixed(data.context.peak_gflops, 0) + " GFLOP/s");
  }

  std::vector<ChildOutcome> failures;
  {
    StopSignals signals;
    for (int64_t child = 0; child < children && !interrupted; ++child) {
      const ChildSpec& spec = specs[static_cast<size_t>(child % per_round)];
      progress.child_started(child);
      ChildOutcome outcome =
          run_child_process(plan, spec, child / per_round, signals, data, progress);
      if (outcome.interrupted || interrupted) {
        if (outcome.failure.empty()) outcome.failure = "interrupted";
        progress.clear();
        std::cerr << "error: interrupted: " << outcome.failure << "; nothing was written\n";
        return 130;
      }
      if (!outcome.finished) {
        progress.clear();
        print_failure(outcome);
        failures.push_back(outcome);
      }
    }
    progress.clear();
    if (interrupted) {
      std::cerr << "error: interrupted; nothing was written\n";
      return 130;
    }
  }

  if (data.runs.empty()) fail("no run was recorded, so nothing was written");
  write_bench_csvs(paths, data);
  // Tables and plot come from the CSVs as written, so `report` rebuilds exactly the same.
  BenchData written = read_bench_data(paths.runs_csv);
  write_bench_report_files(paths, written);
  std::cout << format_tables(written) << std::flush;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.note(concat("[bench] wrote ", paths.runs_csv, ", ", paths.steps_csv, ", ",
                       paths.markdown, ", ", paths.svg, " in ", format_fixed(seconds, 0), " s"));
  for (const ChildOutcome& failure : failures) print_failure(failure);
  return failures.empty() ? 0 : 1;
}

}  // namespace

int bench_command(int argc, char** argv) {
  tools::CommandLine app(
      "fornace-bench", kUsage,
      "Runs each prompt on each model with each attention path and KV cache, one child process "
      "per model, path and cache (so that its peak memory is its own): per prompt, warm-up runs "
      "then recorded runs, greedy with a repeat penalty of "
      "1.1 over the last 64 tokens, end-of-sequence ignored. Writes a runs CSV, a steps CSV, a "
      "Markdown table and an SVG plot, and prints the tables.");
  BenchPlan plan;
  add_bench_flags(app, plan);
  app.footer(
      "`fornace-bench report RUNS.csv` prints the tables and rewrites the .md and .svg from the "
      "runs CSV and its -steps.csv alone.\n\n" +
      EngineSettings::help());
  return app.parse_and_run(argc, argv, [&] {
    plan.models = split_list(plan.model_directory);
    plan.model_labels = distinct_path_labels(plan.models);
    plan.attentions = split_list(plan.attention);
    plan.kinds = split_list(plan.kv_cache);
    plan.cache_types =
        plan.cache_type.empty() ? std::vector<std::string>{""} : split_list(plan.cache_type);
    plan.prompts = split_list(plan.prompt_list);
    return run_bench(plan);
  });
}

int roofs_command(int argc, char** argv) {
  tools::CommandLine app("fornace-bench roofs", "usage: fornace-bench roofs [--threads N]",
                         "Measures the machine's roofs as the bench does (the streaming read: 1 GiB, "
                         "best of 5 passes; the register-only peak of the GEMM's arithmetic) and prints "
                         "them as one JSON line, for tools that quote speed as a share of them.");
  int64_t threads = 0;
  tools::add_threads_flag(app, threads);
  return app.parse_and_run(argc, argv, [&] {
    set_num_threads(static_cast<int>(threads));
    const CpuIdentity cpu = cpu_identity();
    nlohmann::json roofs = {
        {"read_gbs", roofs::measure_read_bandwidth_gbs(kBandwidthBytes, kBandwidthPasses)},
        {"peak_gflops", roofs::measure_gemm_peak_gflops(cpu::active_isa())},
        {"peak_instruction", roofs::gemm_peak_name(cpu::active_isa(), roofs::has_amx_dot())},
        {"threads", threads},
        {"cpu", cpu.model_name},
        {"cpu_family", cpu.family},
        {"cpu_model", cpu.model}};
    std::cout << roofs.dump() << std::endl;
    return 0;
  });
}

}  // namespace fornace::bench
