// One updating line of progress on stderr (done, rate, time left) while long work runs, shown
// only when stderr is a terminal and the command is not quiet.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fornace::tools {

// The least time between two redraws: FORNACE_PROGRESS_INTERVAL_MS, 100 by default.
inline std::chrono::milliseconds progress_interval() {
  const char* text = std::getenv("FORNACE_PROGRESS_INTERVAL_MS");
  return std::chrono::milliseconds(text ? std::atoll(text) : 100);
}

class ProgressLine {
 public:
  // `what` starts the line ("prefill"); `unit` names what is counted ("tokens", "MB").
  ProgressLine(std::string what, std::string unit, bool quiet)
      : what_(std::move(what)),
        unit_(std::move(unit)),
        enabled_(!quiet && ::isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()) {}
  // A line whose whole text the caller gives to show().
  explicit ProgressLine(bool quiet) : ProgressLine("", "", quiet) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { clear(); }

  // Whether the line is drawn at all.
  bool enabled() const { return enabled_; }

  // Redraws the line, at most every FORNACE_PROGRESS_INTERVAL_MS (default 100; the first and
  // the last update always).
  void update(int64_t done, int64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (!due(now, done >= total)) return;
    double seconds = std::chrono::duration<double>(now - start_).count();
    double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    char line[160];
    int length =
        std::snprintf(line, sizeof(line), "%s: %lld / %lld %s", what_.c_str(),
                      static_cast<long long>(done), static_cast<long long>(total), unit_.c_str());
    if (rate > 0 && length > 0 && length < static_cast<int>(sizeof(line))) {
      std::snprintf(line + length, sizeof(line) - length, ", %.0f %s/s, %.0f s left", rate,
                    unit_.c_str(), static_cast<double>(total - done) / rate);
    }
    draw(line, now);
  }

  // Redraws the line as `text`, at most every FORNACE_PROGRESS_INTERVAL_MS unless `always`
  // (the first time always).
  void show(const std::string& text, bool always = false) {
    auto now = std::chrono::steady_clock::now();
    if (due(now, always)) draw(text, now);
  }

  // Erases the line, so that what follows starts on a clean line.
  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\x1b[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool due(std::chrono::steady_clock::time_point now, bool always) const {
    return enabled_ && (always || !shown_ || now - last_shown_ >= interval_);
  }

  // A line wider than the terminal would wrap, and "\r" would then redraw only its last row:
  // it is cut to the terminal's width (at a character's first byte).
  void draw(std::string text, std::chrono::steady_clock::time_point now) {
    winsize size{};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 &&
        text.size() >= size.ws_col) {
      size_t cut = size.ws_col - 1;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      text.resize(cut);
    }
    std::fprintf(stderr, "\r%s\x1b[K", text.c_str());
    std::fflush(stderr);
    shown_ = true;
    last_shown_ = now;
  }

  std::string what_;
  std::string unit_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_shown_;
  std::chrono::milliseconds interval_ = progress_interval();
};

}  // namespace fornace::tools
