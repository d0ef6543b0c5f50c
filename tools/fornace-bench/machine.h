// The machine and build a bench runs on, and its measured streaming read bandwidth.
#pragma once

#include <cstddef>
#include <string>

namespace fornace::bench {

// "model name" of the first processor in /proc/cpuinfo, or "unknown".
std::string cpu_model_name();
// Today's local date as YYYY-MM-DD.
std::string local_date();

struct GitState {
  std::string commit = "unknown";  // git rev-parse --short HEAD
  bool dirty = false;              // git status --porcelain printed anything
  std::string top_level;           // git rev-parse --show-toplevel; empty outside git
};
// The state of the repository around the current directory.
GitState git_state();

// Best of `passes` streaming reads (summing 64-bit words) over a buffer of `bytes`, split across
// the global thread pool, in GB/s (1e9 bytes per second). The buffer is written once first so
// its pages exist, and freed before returning.
double measure_read_bandwidth_gbs(size_t bytes, int passes);

}  // namespace fornace::bench
