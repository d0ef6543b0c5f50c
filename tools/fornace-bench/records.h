// What a bench measures: the context of a bench (machine, build), one row per recorded run and
// one per decode step, and their two CSV files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fornace::bench {

// Where and how a bench ran; every row of both CSVs carries it.
struct BenchContext {
  std::string date;  // YYYY-MM-DD, local time.
  std::string cpu;   // "model name" of /proc/cpuinfo.
  // "cpu family" and "model" of /proc/cpuinfo; empty in files written before they were recorded.
  std::string cpu_family;
  std::string cpu_model;
  int64_t cores = 0;  // Cores the process may run on.
  int64_t threads = 0;
  std::string dtype;       // Weight dtype of the loaded model.
  std::string commit;      // Short commit, or "unknown" outside git.
  bool dirty = false;      // The working tree had changes (git status --porcelain).
  double read_gbs = 0;     // Measured streaming read bandwidth, GB/s (1e9 bytes).
  double peak_gflops = 0;  // Measured register-only BF16 dot-product rate; 0 when unknown.
  std::string kernels;     // cpu::kernel_choices(); empty in files written before it was recorded.
};

// "AMD EPYC (family 25, model 17)", or the name with "(family and model not recorded)".
std::string cpu_description(const BenchContext& context);
// The kernels line of the tables: "Kernels: ..." or "Kernels: not recorded".
std::string kernels_description(const BenchContext& context);

// Whether the records hold more than one KV cache type; tables and plots then name a cache by
// its kind and type ("prealloc q8_0"), otherwise by its kind alone.
template <typename Record>
bool several_cache_types(const std::vector<Record>& records) {
  for (const Record& record : records) {
    if (record.cache_type != records.front().cache_type) return true;
  }
  return false;
}
template <typename Record>
std::string cache_label(const Record& record, bool with_type) {
  return with_type ? record.kv_cache + " " + record.cache_type : record.kv_cache;
}

// One recorded run of one prompt on one model with one attention path and KV cache.
struct RunRecord {
  // The model's label (its directory's last component) and directory; empty in files written
  // before several models were measured in one bench, which measured one.
  std::string model;
  std::string model_directory;
  std::string attention = "fused";  // "fused" in files written before the path was chosen.
  std::string kv_cache;
  // What the KV cache stores ("bf16", "q8_0", ...); empty in files written before it was chosen.
  std::string cache_type;
  std::string prompt;  // The prompt file as given on the command line.
  int64_t prompt_tokens = 0;
  int64_t run = 0;  // 1-based among the recorded runs.
  double prefill_ms = 0;
  double decode_tok_s = 0;
  double mean_ms_last64 = 0;
  double peak_mib = 0;  // VmHWM of the child when the run ended.
  int64_t decode_steps = 0;
  int64_t weight_bytes = 0;           // Bytes of all weights, each tensor once.
  int64_t kv_bytes_per_position = 0;  // K and V of all layers for one position.
  // Streaming read bandwidth over the weights where the kernels read them, measured just before
  // and just after this run and averaged (the machine's bandwidth drifts; older files hold the
  // figure before the run only); 0 in files written before it was recorded.
  double read_gbs = 0;
  // The GEMM peak (roofs::gemm_peak_name), measured around this run like read_gbs (the cores'
  // speed drifts too); 0 in files written before it was recorded.
  double peak_gflops = 0;
  double prefill_gflop = 0;  // Arithmetic of the prefill (matmuls, attention, one lm_head row).
  // The linear ops: their share of prefill_gflop, and the ms they took in prefill and over the
  // run's decode steps (fornace --trace's op times). Absent in files written before.
  double prefill_linear_gflop = 0;
  std::optional<double> prefill_linear_ms;
  std::optional<double> decode_linear_ms;
  // K and V bytes attention read per decode step, the mean over the run's steps (a sliding-window
  // layer reads its window only); 0 in files written before it was recorded.
  double kv_bytes_per_token = 0;
  // Over the last 64 decode steps (all when fewer ran): the mean bytes strided copies moved per
  // step, and their bytes per unbroken run. Absent in files written before they were recorded.
  std::optional<double> mean_strided_bytes_last64;
  std::optional<double> bytes_per_run_last64;
};

// One decode step of a recorded run. Step i feeds the token at position prompt_tokens + i, so
// it reads position + 1 positions of the KV cache.
struct StepRecord {
  std::string model;  // As in RunRecord.
  std::string attention = "fused";
  std::string kv_cache;
  std::string cache_type;
  std::string prompt;
  int64_t run = 0;
  int64_t step = 0;
  int64_t position = 0;
  double ms = 0;
  int64_t copied_contiguous_bytes = 0;
  int64_t copied_strided_bytes = 0;
  // Unbroken runs the strided bytes were copied in (bytes / runs is the run length); 0 in files
  // written before it was recorded, as is kv_read_bytes.
  int64_t strided_runs = 0;
  int64_t allocated_bytes = 0;
  int64_t kv_read_bytes = 0;  // K and V bytes attention read in this step.
};

struct BenchData {
  BenchContext context;
  std::vector<RunRecord> runs;
  std::vector<StepRecord> steps;
};

// The CSV texts, header first.
void write_runs_csv(std::ostream& out, const BenchContext& context,
                    const std::vector<RunRecord>& runs);
void write_steps_csv(std::ostream& out, const BenchContext& context,
                     const std::vector<StepRecord>& steps);

// Parses the texts written above; errors name `source_name`. The context comes from the first
// row (a file without rows gives an empty context).
void read_runs_csv(const std::string& text, const std::string& source_name, BenchData& data);
void read_steps_csv(const std::string& text, const std::string& source_name, BenchData& data);

// The companion files of a runs CSV: "<base>.csv" gives "<base>-steps.csv", "<base>.md" and
// "<base>.svg" (a path without ".csv" is taken as the base itself).
struct OutputPaths {
  std::string runs_csv;
  std::string steps_csv;
  std::string markdown;
  std::string svg;
};
OutputPaths output_paths_for(const std::string& runs_csv_path);

}  // namespace fornace::bench
