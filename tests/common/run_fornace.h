// Runs the built fornace binary through the shell and captures its exit status and both streams.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "common/source_paths.h"

namespace fornace {

struct Outcome {
  int exit_code = -1;  // 128 + the signal number when a signal ended the process.
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

inline std::string fornace_binary() { return fornace::test_paths::build("bin/fornace"); }

// Runs `command` (a /bin/sh command line) with `{out}` and `{err}` replaced by the paths of
// files that the command writes its stdout and stderr to, and collects them.
inline Outcome run_shell_capturing(std::string command) {
  static int counter = 0;
  std::string base = fornace::test_paths::build("run-") + std::to_string(::getpid()) + "-" +
                     std::to_string(counter++);
  for (const auto& [name, path] :
       {std::pair<std::string, std::string>{"{out}", base + ".out"}, {"{err}", base + ".err"}}) {
    for (size_t at = command.find(name); at != std::string::npos; at = command.find(name, at)) {
      command.replace(at, name.size(), path);
    }
  }
  int status = std::system(command.c_str());
  Outcome outcome;
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.out = slurp(base + ".out");
  outcome.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return outcome;
}

// Runs `<prefix> build/bin/fornace <arguments>` (arguments shell-quoted) with no stdin.
inline Outcome run_fornace(const std::string& arguments, const std::string& prefix = "") {
  return run_shell_capturing(prefix + fornace_binary() + " " + arguments +
                             " >{out} 2>{err} </dev/null");
}

// One line on stderr that starts with "error: " and contains `fragment`, and `exit_code`.
inline void expect_error(const Outcome& outcome, int exit_code, const std::string& fragment) {
  EXPECT_EQ(outcome.exit_code, exit_code) << outcome.err;
  EXPECT_EQ(outcome.err.rfind("error: ", 0), 0u) << outcome.err;
  EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
  EXPECT_NE(outcome.err.find(fragment), std::string::npos) << outcome.err;
}

}  // namespace fornace
