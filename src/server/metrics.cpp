// Counters of the server and their Prometheus text exposition.
#include "server/metrics.h"

#include <cstdio>

namespace fornace::server {

namespace {

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15g", value);
  return text;
}

// The "# HELP" and "# TYPE" lines of a metric.
std::string header(const char* name, const char* type, const char* help) {
  return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

std::string endpoint_label(const std::string& path) {
  for (const char* route :
       {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"}) {
    if (path == route) return route;
  }
  return "other";
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::observe_time_to_first_token(double milliseconds) {
  double seconds = milliseconds / 1000.0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t bucket = 0; bucket < kTtftBuckets.size(); ++bucket) {
    if (seconds <= kTtftBuckets[bucket]) {
      ++ttft_counts_[bucket];
      break;
    }
  }
  ++ttft_count_;
  ttft_sum_seconds_ += seconds;
}

std::string Metrics::render(const SchedulerStats& stats) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  text += header("fornace_requests_total", "counter", "HTTP requests by endpoint and status.");
  for (const auto& [key, count] : requests_) {
    text += "fornace_requests_total{endpoint=\"" + key.first + "\",status=\"" +
            std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  struct Sample {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const Sample samples[] = {
      {"fornace_completions_submitted_total", "counter", "Completions the scheduler took.",
       static_cast<double>(stats.requests_submitted)},
      {"fornace_completions_finished_total", "counter", "Completions that ended.",
       static_cast<double>(stats.requests_finished)},
      {"fornace_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
       static_cast<double>(stats.prompt_tokens)},
      {"fornace_prompt_tokens_reused_total", "counter",
       "Prompt tokens taken from a slot's cache instead of prefilled.",
       static_cast<double>(stats.reused_prompt_tokens)},
      {"fornace_completion_tokens_total", "counter", "Tokens generated.",
       static_cast<double>(stats.completion_tokens)},
      {"fornace_queue_length", "gauge", "Requests waiting for a slot.",
       static_cast<double>(stats.queue_length)},
      {"fornace_active_slots", "gauge", "Slots running a request.",
       static_cast<double>(stats.active_slots)},
      {"fornace_slots", "gauge", "Slots (requests that can run at once).",
       static_cast<double>(stats.slots)},
      {"fornace_decode_steps_total", "counter", "Batched decode passes.",
       static_cast<double>(stats.decode_steps)},
      {"fornace_decode_seconds_total", "counter", "Time in decode passes.", stats.decode_seconds},
      {"fornace_prefill_seconds_total", "counter", "Time in prefill passes.",
       stats.prefill_seconds},
      {"fornace_decode_tokens_per_second", "gauge",
       "Tokens per second of the recent decode passes, all slots together.",
       stats.recent_decode_tokens_per_second},
  };
  for (const Sample& item : samples) {
    text += header(item.name, item.type, item.help) + item.name + " " + number(item.value) + "\n";
  }

  const char* ttft = "fornace_time_to_first_token_seconds";
  text += header(ttft, "histogram", "Time from submit to the first generated token.");
  int64_t cumulative = 0;
  for (size_t bucket = 0; bucket < kTtftBuckets.size(); ++bucket) {
    cumulative += ttft_counts_[bucket];
    text += std::string(ttft) + "_bucket{le=\"" + number(kTtftBuckets[bucket]) + "\"} " +
            std::to_string(cumulative) + "\n";
  }
  text += std::string(ttft) + "_bucket{le=\"+Inf\"} " + std::to_string(ttft_count_) + "\n";
  text += std::string(ttft) + "_sum " + number(ttft_sum_seconds_) + "\n";
  text += std::string(ttft) + "_count " + std::to_string(ttft_count_) + "\n";
  return text;
}

}  // namespace fornace::server
