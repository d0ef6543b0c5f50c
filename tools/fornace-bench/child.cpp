// The child mode: one model, attention path and KV cache; every prompt run and reported as JSON.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "common/cli.h"
#include "common/progress.h"
#include "common/start_up.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "roofs/probes.h"
#include "cpu/thread_pool.h"
#include "engine/generator.h"
#include "engine/trace.h"
#include "format.h"
#include "models/model.h"
#include "prompts.h"
#include "roofline.h"
#include "test_fault.h"
#include "text/tokenizer.h"

namespace fornace::bench {
namespace {

// One JSON object per line on stdout, flushed at once so the parent sees it if we die next.
// (stderr is for errors only: the parent shows every line of it.)
void emit(const nlohmann::json& event) {
  std::string line = event.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0) {
    fail("writing to the parent's pipe failed");
  }
}

// Tells the parent how far a run's prefill and decode are, for its progress line: at most one
// event per progress interval (FORNACE_PROGRESS_INTERVAL_MS, 100 ms by default), and none
// unless the parent asked for them. Called between decode steps, outside their timing, and
// between prefill chunks, inside prefill's (an event costs microseconds).
class ProgressEvents {
 public:
  explicit ProgressEvents(bool enabled) : enabled_(enabled) {}

  void prefill(int64_t done, int64_t total) {
    if (due()) emit({{"event", "prefill"}, {"done", done}, {"total", total}});
  }

  // After each new token; the first comes from prefill, so decode's rate counts from it.
  void token(int64_t generated) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (generated == 1) decode_start_ = now;
    if (!due()) return;
    double seconds = std::chrono::duration<double>(now - decode_start_).count();
    double tokens_per_second = generated > 1 && seconds > 0 ? (generated - 1) / seconds : 0.0;
    emit({{"event", "token"}, {"generated", generated}, {"tok_s", tokens_per_second}});
  }

 private:
  bool due() {
    if (!enabled_) return false;
    auto now = std::chrono::steady_clock::now();
    if (emitted_ && now - last_emitted_ < interval_) return false;
    emitted_ = true;
    last_emitted_ = now;
    return true;
  }

  bool enabled_;
  bool emitted_ = false;
  std::chrono::steady_clock::time_point last_emitted_;
  std::chrono::steady_clock::time_point decode_start_;
  std::chrono::milliseconds interval_ = tools::progress_interval();
};

// Streaming read bandwidth over the model's weights where its kernels read them (the mapped
// files' pages, or the copies packed at load; best of three passes): decode's roof at this
// moment, on a machine whose bandwidth drifts.
double weights_read_gbs(const Model& model) {
  return roofs::read_bandwidth_gbs(model.weights_read_per_token().regions, 3);
}

struct Roofs {
  double read_gbs = 0;
  double peak_gflops = 0;
};

Roofs measure_roofs(const Model& model) {
  return {weights_read_gbs(model), roofs::measure_gemm_peak_gflops(cpu::active_isa())};
}

// "bf16" for float weights; quantized ones by the formats that hold them, most bytes first
// ("Q5_0+Q8_0+Q6_K+Q4_K"), leaving out the f32 norms and biases.
std::string weight_formats(const Model& model) {
  std::vector<std::pair<int64_t, std::string>> formats;
  for (const auto& [format, bytes] : model.weights_read_per_token().bytes) {
    if (format != "f32" || model.weights_read_per_token().bytes.size() == 1) {
      formats.emplace_back(-bytes, format);
    }
  }
  std::sort(formats.begin(), formats.end());
  std::string joined;
  for (const auto& [bytes, format] : formats) joined += (joined.empty() ? "" : "+") + format;
  return joined;
}

// The mean ms, strided MiB and bytes per run of a run cover its last this many decode steps.
constexpr int64_t kMeanSteps = 64;

// The bytes copied over the last `count` decode steps (all of them when fewer ran).
CopyBytes copied_in_last_steps(const GenerationResult& result, int64_t count) {
  CopyBytes total;
  const size_t first =
      result.steps.size() - std::min(result.steps.size(), static_cast<size_t>(count));
  for (size_t index = first; index < result.steps.size(); ++index) {
    total.contiguous += result.steps[index].copied.contiguous;
    total.strided += result.steps[index].copied.strided;
    total.strided_runs += result.steps[index].copied.strided_runs;
  }
  return total;
}

// The ms that linear ops have taken in `phase` so far (memory::op_times).
double linear_ms(Phase phase) {
  for (const OpTime& op : memory::op_times()) {
    if (op.op == "linear" && op.phase == phase) return op.ms;
  }
  return 0;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void apply_test_fault(const TestFault& fault, const std::string& kind_name) {
  if (fault.kv_cache != kind_name) return;
  if (fault.kind == TestFault::Kind::abort_child) {
    std::fputs("test fault (FORNACE_BENCH_TEST_FAULT): aborting\n", stderr);
    std::abort();
  }
  if (fault.kind == TestFault::Kind::hang_child) {
    std::fputs("test fault (FORNACE_BENCH_TEST_FAULT): hanging\n", stderr);
    while (true) pause();
  }
}

int run_child(const RunFlags& flags, int64_t parent_pid, bool report_progress,
              const EngineSettings& settings) {
  const std::string& kind_name = flags.kv_cache;
  const std::string& model_directory = flags.model_directory;
  const std::vector<std::string> prompts = split_list(flags.prompt_list);
  const int64_t runs = flags.runs;
  const int64_t warmup = flags.warmup;
  const int64_t max_new_tokens = flags.max_new_tokens;

  // Die with the parent, even when it is killed without a chance to stop us.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent_pid != 0 && getppid() != parent_pid) return 1;

  KvCacheKind kind = parse_kv_cache_kind(kind_name);
  ModelOptions model_options;
  model_options.attention = parse_attention_path(flags.attention);
  if (!flags.dtype.empty()) model_options.dtype = parse_dtype(flags.dtype);
  model_options.activation_rounding = parse_activation_rounding(flags.activations);
  if (!flags.cache_type.empty()) {
    model_options.set_kv_cache_type(parse_kv_cache_type(flags.cache_type));
  }
  model_options.packed_cache_directory = settings.packed_cache_directory;
  set_num_threads(static_cast<int>(flags.threads));
  // The linear ops' time per run (two clock reads an op).
  memory::set_op_timing(true);
  TestFault fault = TestFault::from_environment();

  auto load_start = std::chrono::steady_clock::now();
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  {
    memory::PhaseScope phase(Phase::load);
    std::shared_ptr<const ModelFiles> files = tools::open_model_files(model_directory, settings);
    model = load_model(files, model_options);
    for (const std::string& prompt : prompts) {
      if (!is_ids_prompt(prompt) && !tokenizer) tokenizer.emplace(Tokenizer::load(*files));
    }
  }
  double load_ms = elapsed_ms(load_start);
  const ModelConfig& config = model->config();
  KvCacheShape shape = model->kv_cache_shape(1);
  int64_t kv_bytes_per_position = config.num_hidden_layers * shape.bytes_per_position();
  int64_t weight_bytes = model->weights_read_per_token().total();
  emit({{"event", "loaded"},
        {"dtype", weight_formats(*model)},
        {"weight_bytes", weight_bytes},
        {"kv_bytes_per_position", kv_bytes_per_position},
        {"cache_type", kv_cache_type_name(shape.type())},
        {"load_ms", load_ms}});

  SamplerOptions sampling;  // Greedy, repeat penalty 1.1 over the last 64 tokens.
  GenerationOptions generation;
  generation.max_new_tokens = max_new_tokens;
  generation.ignore_eos = true;
  ProgressEvents progress(report_progress);
  generation.on_prefill_progress = [&](int64_t done, int64_t total) {
    progress.prefill(done, total);
  };

  for (const std::string& prompt_path : prompts) {
    std::string text = read_prompt_file(prompt_path);
    std::vector<uint32_t> ids =
        is_ids_prompt(prompt_path) ? parse_prompt_ids(text, prompt_path) : tokenizer->encode(text);
    if (ids.empty()) fail("the prompt file ", prompt_path, " encodes to no tokens");
    for (uint32_t id : ids) {
      if (id >= static_cast<uint64_t>(config.vocab_size)) {
        fail("the prompt file ", prompt_path, " holds id ", id, ", outside the vocabulary of ",
             config.vocab_size);
      }
    }
    int64_t context = static_cast<int64_t>(ids.size()) + max_new_tokens;
    if (context > config.max_position_embeddings) {
      fail(prompt_path, ": ", ids.size(), " prompt tokens + ", max_new_tokens,
           " new tokens exceed the model's max_position_embeddings of ",
           config.max_position_embeddings);
    }
    emit({{"event", "prompt"}, {"prompt", prompt_path}, {"prompt_tokens", ids.size()}});

    Generator generator(*model, kind, context, sampling);
    for (int64_t index = 0; index < warmup + runs; ++index) {
      bool is_warmup = index < warmup;
      int64_t number = is_warmup ? index + 1 : index - warmup + 1;
      emit({{"event", "run_start"},
            {"prompt", prompt_path},
            {"warmup", is_warmup},
            {"run", number}});
      // The roofs just before and just after the run, averaged: the machine's speed drifts, and
      // a roof from one side only can come from another regime than the run's.
      Roofs before = is_warmup ? Roofs{} : measure_roofs(*model);
      int64_t generated = 0;
      const double prefill_linear_before = linear_ms(Phase::prefill);
      const double decode_linear_before = linear_ms(Phase::decode);
      GenerationResult result =
          generator.generate(ids, generation, [&](uint32_t) { progress.token(++generated); });
      const double prefill_linear = linear_ms(Phase::prefill) - prefill_linear_before;
      const double decode_linear = linear_ms(Phase::decode) - decode_linear_before;
      double peak_mib = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
      if (is_warmup) continue;
      Roofs after = measure_roofs(*model);
      const double read_gbs = (before.read_gbs + after.read_gbs) / 2;
      const double peak_gflops = (before.peak_gflops + after.peak_gflops) / 2;
      std::vector<double> step_ms;
      std::vector<int64_t> contiguous, strided, strided_runs, allocated, kv_read;
      for (const DecodeStep& step : result.steps) {
        step_ms.push_back(step.ms);
        contiguous.push_back(step.copied.contiguous);
        strided.push_back(step.copied.strided);
        strided_runs.push_back(step.copied.strided_runs);
        allocated.push_back(step.allocated_bytes);
        kv_read.push_back(step.kv_read_bytes);
      }
      const CopyBytes last_copied = copied_in_last_steps(result, kMeanSteps);
      const int64_t last_count = std::min<int64_t>(kMeanSteps, std::ssize(result.steps));
      const int64_t decode_steps = std::ssize(result.steps);
      emit({{"event", "run"},
            {"prompt", prompt_path},
            {"prompt_tokens", ids.size()},
            {"run", number},
            {"prefill_ms", result.prefill_ms},
            {"decode_tok_s", result.decode_tokens_per_second()},
            {"mean_ms_last64", result.mean_step_ms_last(kMeanSteps)},
            {"mean_strided_bytes_last64",
             last_count > 0 ? static_cast<double>(last_copied.strided) / last_count : 0.0},
            {"bytes_per_run_last64", bytes_per_run(last_copied)},
            {"kv_bytes_per_token",
             kv_bytes_read_per_token(shape, config.num_hidden_layers,
                                     static_cast<int64_t>(ids.size()), decode_steps)},
            {"peak_mib", peak_mib},
            {"read_gbs", read_gbs},
            {"peak_gflops", peak_gflops},
            {"prefill_gflop", prefill_gflop(config, shape, static_cast<int64_t>(ids.size()))},
            {"prefill_linear_gflop",
             prefill_linear_gflop(config, static_cast<int64_t>(ids.size()))},
            {"prefill_linear_ms", prefill_linear},
            {"decode_linear_ms", decode_linear},
            {"step_ms", step_ms},
            {"step_copied_contiguous", contiguous},
            {"step_copied_strided", strided},
            {"step_strided_runs", strided_runs},
            {"step_allocated", allocated},
            {"step_kv_read", kv_read}});
      if (number == 1) apply_test_fault(fault, kind_name);
    }
  }
  emit({{"event", "done"}});
  return 0;
}

}  // namespace

int child_command(int argc, char** argv, const EngineSettings& settings) {
  tools::CommandLine app(
      "fornace-bench --child", "usage: fornace-bench --child [options]",
      "Started by fornace-bench, once per model, attention path and KV cache: not for direct "
      "use.");
  RunFlags flags;
  int64_t parent_pid = 0;
  bool report_progress = false;
  add_run_flags(app, flags);
  app.add_option("--parent-pid", parent_pid, "exit at once unless this is the parent's pid")
      ->type_name("PID")
      ->transform(tools::integer_in(0, INT32_MAX));
  app.add_flag("--progress", report_progress,
               "report prefill and decode progress as JSON events, for the parent's progress line");
  return app.parse_and_run(argc, argv,
                           [&] { return run_child(flags, parent_pid, report_progress, settings); });
}

}  // namespace fornace::bench
