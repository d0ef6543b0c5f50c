// CPU identity, date and git state.
#include "machine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace fornace::bench {
namespace {

// The stdout of a shell command; `ok` is false when it could not run or exited non-zero.
std::string command_output(const std::string& command, bool& ok) {
  std::string output;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) {
    ok = false;
    return output;
  }
  char buffer[4096];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, count);
  ok = pclose(pipe) == 0;
  return output;
}

std::string trimmed(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

CpuIdentity parse_cpu_identity(const std::string& cpuinfo) {
  CpuIdentity identity;
  std::istringstream lines(cpuinfo);
  std::string line;
  // The first processor's block ends at the first blank line.
  while (std::getline(lines, line) && !trimmed(line).empty()) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trimmed(line.substr(0, colon));
    std::string value = trimmed(line.substr(colon + 1));
    if (key == "model name" && !value.empty()) identity.model_name = value;
    if (key == "cpu family") identity.family = value;
    if (key == "model") identity.model = value;
  }
  return identity;
}

CpuIdentity cpu_identity() {
  std::ifstream file("/proc/cpuinfo");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_cpu_identity(text.str());
}

std::string local_date() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[16];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &local);
  return buffer;
}

GitState git_state() {
  GitState state;
  bool ok = false;
  std::string commit = trimmed(command_output("git rev-parse --short HEAD", ok));
  if (!ok || commit.empty()) return state;
  state.commit = commit;
  std::string status = command_output("git status --porcelain", ok);
  state.dirty = !ok || !trimmed(status).empty();
  std::string top = trimmed(command_output("git rev-parse --show-toplevel", ok));
  if (ok) state.top_level = top;
  return state;
}

}  // namespace fornace::bench
