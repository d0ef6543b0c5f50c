// The files of a bench — runs CSV, steps CSV, Markdown tables and SVG plot — written and read.
#pragma once

#include <string>

#include "records.h"

namespace fornace::bench {

// Writes the runs CSV, then the steps CSV, each atomically (a temporary, then a rename).
void write_bench_csvs(const OutputPaths& paths, const BenchData& data);
// Writes the SVG plot (when there are steps) and the Markdown report, each atomically.
void write_bench_report_files(const OutputPaths& paths, const BenchData& data);

// Reads a runs CSV and, when it exists, its steps CSV.
BenchData read_bench_data(const std::string& runs_csv_path);

// The heading of the Markdown report and of the plot.
std::string report_title(const BenchData& data);

}  // namespace fornace::bench
