// The bench's two CSV files: written with the context on every row, and read back for reports.
#include "records.h"

#include <set>

#include "core/error.h"
#include "csv.h"
#include "format.h"

namespace fornace::bench {
namespace {

const std::vector<std::string> kContextColumns = {
    "date",  "cpu",      "cores",       "threads",    "dtype",    "commit",
    "dirty", "read_gbs", "peak_gflops", "cpu_family", "cpu_model", "kernels"};
// Columns added after the first findings were recorded: optional when read.
const std::set<std::string> kLaterColumns = {
    "peak_gflops",         "run_read_gbs", "prefill_gflop", "cpu_family",
    "cpu_model",           "model",        "model_dir",     "attention",
    "kv_bytes_per_token",  "strided_runs", "kv_read_bytes", "mean_strided_bytes_last64",
    "bytes_per_run_last64", "kernels",       "run_peak_gflops", "prefill_linear_gflop",
    "prefill_linear_ms",   "decode_linear_ms", "cache_type"};

const std::vector<std::string> kRunColumns = {"kv_cache",
                                              "prompt",
                                              "prompt_tokens",
                                              "run",
                                              "prefill_ms",
                                              "decode_tok_s",
                                              "mean_ms_last64",
                                              "peak_mib",
                                              "decode_steps",
                                              "weight_bytes",
                                              "kv_bytes_per_position",
                                              "run_read_gbs",
                                              "prefill_gflop",
                                              "model",
                                              "attention",
                                              "model_dir",
                                              "kv_bytes_per_token",
                                              "mean_strided_bytes_last64",
                                              "bytes_per_run_last64",
                                              "run_peak_gflops",
                                              "prefill_linear_gflop",
                                              "prefill_linear_ms",
                                              "decode_linear_ms",
                                              "cache_type"};

const std::vector<std::string> kStepColumns = {"kv_cache",
                                               "prompt",
                                               "run",
                                               "step",
                                               "position",
                                               "ms",
                                               "copied_contiguous_bytes",
                                               "copied_strided_bytes",
                                               "allocated_bytes",
                                               "strided_runs",
                                               "kv_read_bytes",
                                               "model",
                                               "attention",
                                               "cache_type"};

std::vector<std::string> context_fields(const BenchContext& context) {
  return {context.date,
          context.cpu,
          std::to_string(context.cores),
          std::to_string(context.threads),
          context.dtype,
          context.commit,
          context.dirty ? "yes" : "no",
          format_fixed(context.read_gbs, 2),
          format_fixed(context.peak_gflops, 1),
          context.cpu_family,
          context.cpu_model,
          context.kernels};
}

// The columns a file must have: all of them but those added later.
std::vector<std::string> required(const std::vector<std::string>& columns) {
  std::vector<std::string> result;
  for (const std::string& column : columns) {
    if (!kLaterColumns.count(column)) result.push_back(column);
  }
  return result;
}

std::string text_or_empty(const CsvTable& table, size_t row, const std::string& column) {
  return table.has_column(column) ? table.text(row, column) : std::string();
}

double number_or_zero(const CsvTable& table, size_t row, const std::string& column) {
  return table.has_column(column) ? table.number(row, column) : 0.0;
}

int64_t integer_or_zero(const CsvTable& table, size_t row, const std::string& column) {
  return table.has_column(column) ? table.integer(row, column) : 0;
}

// Absent or empty: not recorded.
std::optional<double> number_if_recorded(const CsvTable& table, size_t row,
                                         const std::string& column) {
  if (!table.has_column(column) || table.text(row, column).empty()) return std::nullopt;
  return table.number(row, column);
}

// Files written before the attention path was chosen measured the fused one.
std::string attention_or_fused(const CsvTable& table, size_t row) {
  return table.has_column("attention") ? table.text(row, "attention") : "fused";
}

std::string optional_number(const std::optional<double>& value, int decimals) {
  return value ? format_fixed(*value, decimals) : std::string();
}

std::vector<std::string> joined(std::vector<std::string> first,
                                const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

BenchContext read_context(const CsvTable& table, const std::string& source_name) {
  BenchContext context;
  if (table.rows() == 0) return context;
  context.date = table.text(0, "date");
  context.cpu = table.text(0, "cpu");
  context.cpu_family = text_or_empty(table, 0, "cpu_family");
  context.cpu_model = text_or_empty(table, 0, "cpu_model");
  context.kernels = text_or_empty(table, 0, "kernels");
  context.cores = table.integer(0, "cores");
  context.threads = table.integer(0, "threads");
  context.dtype = table.text(0, "dtype");
  context.commit = table.text(0, "commit");
  const std::string& dirty = table.text(0, "dirty");
  if (dirty != "yes" && dirty != "no") {
    fail(source_name, ": column 'dirty' must be yes or no, got '", dirty, "'");
  }
  context.dirty = dirty == "yes";
  context.read_gbs = table.number(0, "read_gbs");
  context.peak_gflops = number_or_zero(table, 0, "peak_gflops");
  return context;
}

}  // namespace

std::string cpu_description(const BenchContext& context) {
  if (context.cpu_family.empty() && context.cpu_model.empty()) {
    return context.cpu + " (family and model not recorded)";
  }
  auto or_unknown = [](const std::string& value) { return value.empty() ? "?" : value; };
  return context.cpu + " (family " + or_unknown(context.cpu_family) + ", model " +
         or_unknown(context.cpu_model) + ")";
}

std::string kernels_description(const BenchContext& context) {
  return "Kernels: " + (context.kernels.empty() ? std::string("not recorded") : context.kernels);
}

void write_runs_csv(std::ostream& out, const BenchContext& context,
                    const std::vector<RunRecord>& runs) {
  out << csv_line(joined(kRunColumns, kContextColumns));
  std::vector<std::string> shared = context_fields(context);
  for (const RunRecord& run : runs) {
    std::vector<std::string> fields = {run.kv_cache,
                                       run.prompt,
                                       std::to_string(run.prompt_tokens),
                                       std::to_string(run.run),
                                       format_fixed(run.prefill_ms, 3),
                                       format_fixed(run.decode_tok_s, 3),
                                       format_fixed(run.mean_ms_last64, 4),
                                       format_fixed(run.peak_mib, 1),
                                       std::to_string(run.decode_steps),
                                       std::to_string(run.weight_bytes),
                                       std::to_string(run.kv_bytes_per_position),
                                       format_fixed(run.read_gbs, 2),
                                       format_fixed(run.prefill_gflop, 3),
                                       run.model,
                                       run.attention,
                                       run.model_directory,
                                       format_fixed(run.kv_bytes_per_token, 1),
                                       optional_number(run.mean_strided_bytes_last64, 1),
                                       optional_number(run.bytes_per_run_last64, 1),
                                       format_fixed(run.peak_gflops, 1),
                                       format_fixed(run.prefill_linear_gflop, 3),
                                       optional_number(run.prefill_linear_ms, 3),
                                       optional_number(run.decode_linear_ms, 3),
                                       run.cache_type};
    out << csv_line(joined(fields, shared));
  }
}

void write_steps_csv(std::ostream& out, const BenchContext& context,
                     const std::vector<StepRecord>& steps) {
  out << csv_line(joined(kStepColumns, kContextColumns));
  std::vector<std::string> shared = context_fields(context);
  for (const StepRecord& step : steps) {
    std::vector<std::string> fields = {step.kv_cache,
                                       step.prompt,
                                       std::to_string(step.run),
                                       std::to_string(step.step),
                                       std::to_string(step.position),
                                       format_fixed(step.ms, 4),
                                       std::to_string(step.copied_contiguous_bytes),
                                       std::to_string(step.copied_strided_bytes),
                                       std::to_string(step.allocated_bytes),
                                       std::to_string(step.strided_runs),
                                       std::to_string(step.kv_read_bytes),
                                       step.model,
                                       step.attention,
                                       step.cache_type};
    out << csv_line(joined(fields, shared));
  }
}

void read_runs_csv(const std::string& text, const std::string& source_name, BenchData& data) {
  CsvTable table = CsvTable::parse(text, source_name);
  table.require_columns(required(joined(kRunColumns, kContextColumns)));
  data.context = read_context(table, source_name);
  for (size_t row = 0; row < table.rows(); ++row) {
    RunRecord run;
    run.kv_cache = table.text(row, "kv_cache");
    run.prompt = table.text(row, "prompt");
    run.prompt_tokens = table.integer(row, "prompt_tokens");
    run.run = table.integer(row, "run");
    run.prefill_ms = table.number(row, "prefill_ms");
    run.decode_tok_s = table.number(row, "decode_tok_s");
    run.mean_ms_last64 = table.number(row, "mean_ms_last64");
    run.peak_mib = table.number(row, "peak_mib");
    run.decode_steps = table.integer(row, "decode_steps");
    run.weight_bytes = table.integer(row, "weight_bytes");
    run.kv_bytes_per_position = table.integer(row, "kv_bytes_per_position");
    run.read_gbs = number_or_zero(table, row, "run_read_gbs");
    run.peak_gflops = number_or_zero(table, row, "run_peak_gflops");
    run.prefill_gflop = number_or_zero(table, row, "prefill_gflop");
    run.model = text_or_empty(table, row, "model");
    run.model_directory = text_or_empty(table, row, "model_dir");
    run.attention = attention_or_fused(table, row);
    run.kv_bytes_per_token = number_or_zero(table, row, "kv_bytes_per_token");
    run.mean_strided_bytes_last64 = number_if_recorded(table, row, "mean_strided_bytes_last64");
    run.bytes_per_run_last64 = number_if_recorded(table, row, "bytes_per_run_last64");
    run.prefill_linear_gflop = number_or_zero(table, row, "prefill_linear_gflop");
    run.prefill_linear_ms = number_if_recorded(table, row, "prefill_linear_ms");
    run.decode_linear_ms = number_if_recorded(table, row, "decode_linear_ms");
    run.cache_type = text_or_empty(table, row, "cache_type");
    data.runs.push_back(run);
  }
}

void read_steps_csv(const std::string& text, const std::string& source_name, BenchData& data) {
  CsvTable table = CsvTable::parse(text, source_name);
  table.require_columns(required(joined(kStepColumns, kContextColumns)));
  for (size_t row = 0; row < table.rows(); ++row) {
    StepRecord step;
    step.kv_cache = table.text(row, "kv_cache");
    step.prompt = table.text(row, "prompt");
    step.run = table.integer(row, "run");
    step.step = table.integer(row, "step");
    step.position = table.integer(row, "position");
    step.ms = table.number(row, "ms");
    step.copied_contiguous_bytes = table.integer(row, "copied_contiguous_bytes");
    step.copied_strided_bytes = table.integer(row, "copied_strided_bytes");
    step.allocated_bytes = table.integer(row, "allocated_bytes");
    step.strided_runs = integer_or_zero(table, row, "strided_runs");
    step.kv_read_bytes = integer_or_zero(table, row, "kv_read_bytes");
    step.model = text_or_empty(table, row, "model");
    step.cache_type = text_or_empty(table, row, "cache_type");
    step.attention = attention_or_fused(table, row);
    data.steps.push_back(step);
  }
}

OutputPaths output_paths_for(const std::string& runs_csv_path) {
  std::string base = runs_csv_path;
  const std::string extension = ".csv";
  if (base.size() > extension.size() &&
      base.compare(base.size() - extension.size(), extension.size(), extension) == 0) {
    base.resize(base.size() - extension.size());
  }
  return OutputPaths{base + ".csv", base + "-steps.csv", base + ".md", base + ".svg"};
}

}  // namespace fornace::bench
