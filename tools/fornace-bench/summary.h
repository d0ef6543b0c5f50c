// The summary tables of a bench, one per prompt, in the shape of finding 0001 plus roofline
// columns, as Markdown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "records.h"

namespace fornace::bench {

// Bytes a decode step reads, averaged over the run's steps: every weight once (a tied embedding
// is stored once and read once, as the lm_head) plus the KV cache up to the step's position.
double bytes_read_per_token(const RunRecord& run);

// One row of a prompt's table: the recorded runs of one KV cache.
struct CacheSummary {
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
  double percent_of_peak = 0;      // Of the context's BF16 peak; 0 when unknown.
};

struct PromptSummary {
  std::string prompt;
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;            // Decode steps + 1 (the first token comes from prefill).
  std::vector<CacheSummary> caches;  // In the order the caches first appear.
};

// Groups the runs by prompt, then by cache, each in order of first appearance.
std::vector<PromptSummary> summarize_runs(const BenchData& data);

// The tables alone: a heading per prompt and a Markdown table (padded to line up in a terminal).
std::string format_tables(const BenchData& data);
// A whole Markdown report: the context, the tables and, when `svg_name` is not empty, the plot.
std::string format_markdown_report(const BenchData& data, const std::string& title,
                                   const std::string& svg_name);

}  // namespace fornace::bench
