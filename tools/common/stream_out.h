// Text written to stdout as it is generated, and the clock that times it.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace fornace::tools {

// Raised when stdout is closed under us (e.g. `| head`): generation stops quietly.
struct OutputClosed {};

// Writes and flushes `text` (with SIGPIPE ignored, a closed pipe raises OutputClosed).
inline void write_out(const std::string& text) {
  if (text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    if (errno == EPIPE) throw OutputClosed{};
    fail("writing to stdout failed");
  }
}

// Milliseconds since `start`.
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace fornace::tools
