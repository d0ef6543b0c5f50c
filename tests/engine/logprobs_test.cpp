// Token log-probabilities against a naive double-precision log-softmax over the whole vocabulary.
#include "engine/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"

namespace fornace {
namespace {

std::vector<double> naive_log_softmax(const std::vector<float>& logits) {
  double sum = 0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit));
  std::vector<double> result;
  for (float logit : logits) result.push_back(logit - std::log(sum));
  return result;
}

TEST(TokenLogprob, MatchesTheLogSoftmaxAtTheChosenAndTheTopIds) {
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(5000);
  for (float& logit : logits) logit = normal(generator);
  logits[17] = logits[4000];  // A tie: the lower id ranks first.
  const std::vector<double> expected = naive_log_softmax(logits);
  std::vector<uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return expected[a] > expected[b]; });

  for (int64_t top : {0, 1, 5, 20}) {
    TokenLogprob result = token_logprob(logits, 4000, top);
    EXPECT_EQ(result.id, 4000u);
    EXPECT_NEAR(result.logprob, expected[4000], 1e-9);
    ASSERT_EQ(result.top.size(), static_cast<size_t>(top));
    for (int64_t rank = 0; rank < top; ++rank) {
      EXPECT_EQ(result.top[rank].first, order[rank]) << "rank " << rank;
      EXPECT_NEAR(result.top[rank].second, expected[order[rank]], 1e-9);
    }
  }
}

TEST(TokenLogprob, StaysFiniteForLargeLogitsAndRefusesAnIdOutsideThem) {
  std::vector<float> logits = {1000.0f, 999.0f, -1000.0f};
  TokenLogprob result = token_logprob(logits, 1, 3);
  EXPECT_NEAR(result.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-9);
  EXPECT_EQ(result.top.size(), 3u);
  EXPECT_TRUE(std::isfinite(result.top[2].second));
  EXPECT_THROW(token_logprob(logits, 3, 0), Error);
}

}  // namespace
}  // namespace fornace
