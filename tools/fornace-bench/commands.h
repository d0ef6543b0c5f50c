// The modes of fornace-bench: the bench itself (the parent), its hidden child mode, and report.
#pragma once

#include <string>

#include "common/args.h"

namespace fornace::bench {

// fornace-bench --model DIR --kv-cache a,b --prompts p1,p2 [...]: validates, measures the read
// bandwidth, runs one child per KV cache and writes the CSVs, tables and plot.
int run_bench(tools::Args& args);
// fornace-bench --child ...: loads the model once and runs every prompt with one KV cache,
// reporting JSON lines on stdout and progress on stderr. Started by run_bench only.
int run_child(tools::Args& args);
// fornace-bench report CSV: the tables and the plot again, from the CSVs alone.
int run_report(const std::string& runs_csv_path, tools::Args& args);

}  // namespace fornace::bench
