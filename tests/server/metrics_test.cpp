// GET /metrics: the Prometheus text format of the request counters, the scheduler's stats and
// the time-to-first-token histogram.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace fornace::server {
namespace {

// The value of the sample line that starts with `series` followed by a space.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  ADD_FAILURE() << "no sample " << series;
  return -1;
}

TEST(Metrics, EveryLineIsACommentOrASample) {
  Metrics metrics;
  metrics.count_request("/v1/chat/completions", 200);
  metrics.observe_time_to_first_token(30);
  std::string text = metrics.render(SchedulerStats{});
  const std::regex comment(R"(# (HELP|TYPE) fornace_[a-z_]+ .+)");
  const std::regex series(
      R"(fornace_[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+-]+)");
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("#", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, series)) << line;
      ++samples;
    }
  }
  EXPECT_GT(samples, 20);
  EXPECT_EQ(text.back(), '\n');
}

TEST(Metrics, RequestsCountByEndpointAndStatus) {
  Metrics metrics;
  metrics.count_request("/v1/chat/completions", 200);
  metrics.count_request("/v1/chat/completions", 200);
  metrics.count_request("/v1/chat/completions", 400);
  metrics.count_request(endpoint_label("/v1/completions"), 503);
  metrics.count_request(endpoint_label("/secret/admin"), 404);
  std::string text = metrics.render(SchedulerStats{});
  EXPECT_EQ(sample(text, R"(fornace_requests_total{endpoint="/v1/chat/completions",status="200"})"),
            2);
  EXPECT_EQ(sample(text, R"(fornace_requests_total{endpoint="/v1/chat/completions",status="400"})"),
            1);
  EXPECT_EQ(sample(text, R"(fornace_requests_total{endpoint="/v1/completions",status="503"})"), 1);
  EXPECT_EQ(sample(text, R"(fornace_requests_total{endpoint="other",status="404"})"), 1);
  EXPECT_EQ(text.find("/secret/admin"), std::string::npos);
}

TEST(Metrics, SchedulerStatsAppearAsGaugesAndCounters) {
  SchedulerStats stats;
  stats.slots = 4;
  stats.active_slots = 3;
  stats.queue_length = 2;
  stats.prompt_tokens = 100;
  stats.completion_tokens = 40;
  stats.recent_decode_tokens_per_second = 123.5;
  std::string text = Metrics().render(stats);
  EXPECT_EQ(sample(text, "fornace_slots"), 4);
  EXPECT_EQ(sample(text, "fornace_active_slots"), 3);
  EXPECT_EQ(sample(text, "fornace_queue_length"), 2);
  EXPECT_EQ(sample(text, "fornace_prompt_tokens_total"), 100);
  EXPECT_EQ(sample(text, "fornace_completion_tokens_total"), 40);
  EXPECT_EQ(sample(text, "fornace_decode_tokens_per_second"), 123.5);
  EXPECT_NE(text.find("# TYPE fornace_queue_length gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE fornace_completion_tokens_total counter\n"), std::string::npos);
}

TEST(Metrics, TimeToFirstTokenIsACumulativeHistogramInSeconds) {
  Metrics metrics;
  for (double ms : {3.0, 40.0, 40.0, 700.0, 60000.0}) metrics.observe_time_to_first_token(ms);
  std::string text = metrics.render(SchedulerStats{});
  const std::string name = "fornace_time_to_first_token_seconds";
  EXPECT_NE(text.find("# TYPE " + name + " histogram\n"), std::string::npos);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="0.005"})"), 1);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="0.025"})"), 1);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="0.05"})"), 3);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="1"})"), 4);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="30"})"), 4);
  EXPECT_EQ(sample(text, name + R"(_bucket{le="+Inf"})"), 5);
  EXPECT_EQ(sample(text, name + "_count"), 5);
  EXPECT_NEAR(sample(text, name + "_sum"), 60.783, 1e-9);
}

}  // namespace
}  // namespace fornace::server
