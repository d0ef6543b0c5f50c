// The modes of fornace-bench: the bench itself (the parent), its hidden child mode, and report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/settings.h"

namespace fornace::tools {
class CommandLine;
}

namespace fornace::bench {

// fornace-bench --model A,B --attention fused,candle --kv-cache a,b --prompts p1,p2 [...]:
// validates, measures the read bandwidth, runs one child per model, attention path and KV cache
// and writes the CSVs, tables and plot.
int bench_command(int argc, char** argv);
// fornace-bench --child ...: loads one model once and runs every prompt with one attention path
// and one KV cache, reporting JSON lines on stdout (with --progress, how far each run is too) and
// errors only on stderr. Started by bench_command only; argv[0] is "--child".
int child_command(int argc, char** argv, const EngineSettings& settings);
// fornace-bench report CSV: the tables and the plot again, from the CSVs alone; argv[0] is
// "report".
int report_command(int argc, char** argv);
// fornace-bench roofs [--threads N]: the read bandwidth and the GEMM's peak as one JSON line;
// argv[0] is "roofs".
int roofs_command(int argc, char** argv);

// The flags that the bench passes on to each child, defined once for both.
struct RunFlags {
  std::string model_directory;      // Comma-separated in the bench; one directory in a child.
  std::string attention = "fused";  // Comma-separated in the bench; one path in a child.
  std::string kv_cache;             // Comma-separated in the bench; one kind in a child.
  std::string cache_type;   // KV cache types, comma-separated in the bench; empty: the model's.
  std::string prompt_list;  // Comma-separated prompt files.
  int64_t runs = 3;
  int64_t warmup = 1;
  int64_t max_new_tokens = 128;
  int64_t threads = 1;
  std::string dtype;  // Empty: as stored.
  std::string activations = "int8";
};

void add_run_flags(tools::CommandLine& app, RunFlags& flags);
// The command-line arguments that give `flags` to a child, as `--name=value`.
std::vector<std::string> run_flag_arguments(const RunFlags& flags);

}  // namespace fornace::bench
