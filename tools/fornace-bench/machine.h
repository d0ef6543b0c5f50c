// The machine and build a bench runs on.
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

}  // namespace fornace::bench
