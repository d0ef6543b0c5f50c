// The summary tables of a bench, one per model and prompt, in the shape of finding 0001 plus
// strided-copy and roofline columns, as Markdown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "records.h"

namespace fornace::bench {

// Bytes a decode step reads, averaged over the run's steps: every weight once (a tied embedding
// is stored once and read once, as the lm_head) plus the KV cache that attention reads at the
// step's position (kv_bytes_per_token; in older files, every layer's K and V up to it).
double bytes_read_per_token(const RunRecord& run);

// One row of a table: the recorded runs of one attention path and KV cache.
struct CacheSummary {
  std::string attention;
  std::string kv_cache;
  std::vector<double> decode_tok_s;  // Per run, in run order.
  double mean_tok_s = 0;
  double min_mean_ms_last64 = 0;
  double max_mean_ms_last64 = 0;
  double min_peak_mib = 0;
  double max_peak_mib = 0;
  double mean_prefill_tok_s = 0;
  double bytes_per_token = 0;
  double achieved_gbs = 0;  // bytes_per_token x mean_tok_s.
  // Read bandwidth measured before each run (the context's when the runs lack it).
  double min_read_gbs = 0;
  double max_read_gbs = 0;
  // Mean over the runs of each run's achieved GB/s over its read bandwidth; 0 when unknown.
  double percent_of_bandwidth = 0;
  double mean_prefill_gflops = 0;  // Prefill arithmetic over prefill time; 0 when unknown.
  // Each run's prefill GFLOP/s over its own BF16 peak (the context's for older files),
  // averaged; 0 when unknown.
  double percent_of_peak = 0;
  // The linear ops alone, means over the runs that recorded their time (0 when none did): the
  // weight bytes over the ms they took in decode, over each run's read bandwidth; their prefill
  // GFLOP over their prefill ms, over each run's peak.
  double linear_percent_of_read = 0;
  double linear_percent_of_peak = 0;
  // Means over the runs of their last-64-step strided MiB per step and bytes per run; absent
  // when a run did not record them.
  std::optional<double> strided_mib_per_step;
  std::optional<double> bytes_per_run;
};

// One table: a prompt on one model.
struct PromptSummary {
  std::string model;  // Empty in files that did not record it.
  std::string prompt;
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;            // Decode steps + 1 (the first token comes from prefill).
  std::vector<CacheSummary> caches;  // In the order the (path, cache) pairs first appear.
};

// Groups the runs by (model, prompt), then by (attention path, cache), each in order of first
// appearance.
std::vector<PromptSummary> summarize_runs(const BenchData& data);

// The tables alone: a heading per model and prompt and a Markdown table (padded to line up in a
// terminal).
std::string format_tables(const BenchData& data);
// A whole Markdown report: the context, the tables and, when `svg_name` is not empty, the plot.
std::string format_markdown_report(const BenchData& data, const std::string& title,
                                   const std::string& svg_name);

}  // namespace fornace::bench
