// The server's counters and the Prometheus text exposition of GET /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/scheduler.h"

namespace fornace::server {

class Metrics {
 public:
  // Upper bounds (seconds) of the time-to-first-token histogram's buckets, +Inf aside.
  static constexpr std::array<double, 12> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                          0.5,   1,    2.5,   5,    10,  30};

  // One HTTP response; `endpoint` is the route ("/v1/chat/completions", ..., or "other").
  void count_request(const std::string& endpoint, int status);
  // A completion's time from submit to its first token.
  void observe_time_to_first_token(double milliseconds);

  // Prometheus text format (version 0.0.4) of these counters and the scheduler's `stats`.
  std::string render(const SchedulerStats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::array<int64_t, kTtftBuckets.size()> ttft_counts_{};  // Per bucket, not cumulative.
  int64_t ttft_count_ = 0;
  double ttft_sum_seconds_ = 0;
};

// The route label of a request path: a known route, or "other".
std::string endpoint_label(const std::string& path);

}  // namespace fornace::server
