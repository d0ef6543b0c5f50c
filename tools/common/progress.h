// One updating line of progress on stderr (done, rate, time left) while long work runs, shown
// only when stderr is a terminal and the command is not quiet.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fornace::tools {

class ProgressLine {
 public:
  // `what` starts the line ("prefill"); `unit` names what is counted ("tokens", "MB").
  ProgressLine(std::string what, std::string unit, bool quiet)
      : what_(std::move(what)), unit_(std::move(unit)), enabled_(!quiet && ::isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { clear(); }

  // Redraws the line, at most every FORNACE_PROGRESS_INTERVAL_MS (default 100; the first and
  // the last update always).
  void update(int64_t done, int64_t total) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (shown_ && done < total && now - last_shown_ < interval_) return;
    double seconds = std::chrono::duration<double>(now - start_).count();
    double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    char line[160];
    int length = std::snprintf(line, sizeof(line), "\r%s: %lld / %lld %s", what_.c_str(),
                               static_cast<long long>(done), static_cast<long long>(total),
                               unit_.c_str());
    if (rate > 0 && length > 0 && length < static_cast<int>(sizeof(line))) {
      std::snprintf(line + length, sizeof(line) - length, ", %.0f %s/s, %.0f s left", rate,
                    unit_.c_str(), static_cast<double>(total - done) / rate);
    }
    std::fprintf(stderr, "%s\x1b[K", line);
    std::fflush(stderr);
    shown_ = true;
    last_shown_ = now;
  }

  // Erases the line, so that what follows starts on a clean line.
  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\x1b[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  std::string what_;
  std::string unit_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_shown_;
  std::chrono::milliseconds interval_{[] {
    const char* text = std::getenv("FORNACE_PROGRESS_INTERVAL_MS");
    return text ? std::atoll(text) : 100;
  }()};
};

}  // namespace fornace::tools
