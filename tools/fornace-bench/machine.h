// The machine and build a bench runs on.
#pragma once

#include <cstddef>
#include <string>

namespace fornace::bench {

// The first processor of /proc/cpuinfo: "model name", "cpu family" and "model".
struct CpuIdentity {
  std::string model_name = "unknown";
  std::string family;  // Empty when the file has no such line (not x86).
  std::string model;
};
// Reads the fields from the text of /proc/cpuinfo.
CpuIdentity parse_cpu_identity(const std::string& cpuinfo);
// This machine's, from /proc/cpuinfo.
CpuIdentity cpu_identity();
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
