// The sampler: repeat penalty semantics, greedy choice, and the seeded filters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"

namespace fornace {
namespace {

// Sampling at `temperature` with no repeat penalty.
SamplerOptions at_temperature(double temperature) {
  SamplerOptions options;
  options.temperature = temperature;
  options.repeat_penalty = 1.0;
  return options;
}

TEST(RepeatPenalty, DividesPositiveAndMultipliesNegativeLogitsOncePerDistinctId) {
  std::vector<float> logits = {2.0f, -2.0f, 0.5f, 3.0f};
  // Id 0 appears twice: it is penalised once, as HF and Candle do.
  apply_repeat_penalty(logits, {0, 1, 0}, 2.0, 64);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -4.0f);
  EXPECT_FLOAT_EQ(logits[2], 0.5f);
  EXPECT_FLOAT_EQ(logits[3], 3.0f);
}

TEST(RepeatPenalty, LooksOnlyAtTheLastNIds) {
  std::vector<float> logits = {2.0f, 2.0f, 2.0f};
  apply_repeat_penalty(logits, {0, 1, 2}, 2.0, 2);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
}

TEST(FrequencyPresencePenalty, SubtractsCountTimesFrequencyPlusPresenceOncePerId) {
  std::vector<float> logits = {2.0f, 2.0f, 2.0f, 2.0f};
  // Id 1 three times, id 3 once, id 9 outside the vocabulary; id 0 and 2 never.
  const std::vector<uint32_t> generated = {1, 3, 1, 9, 1};
  apply_frequency_presence_penalty(logits, generated, 0.25, 0.5);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[2], 2.0f);
  EXPECT_FLOAT_EQ(logits[3], 2.0f - 0.25f - 0.5f);
  // Negative penalties favour repeats, as OpenAI's do.
  std::vector<float> favoured = {0.0f, 0.0f};
  const std::vector<uint32_t> once = {1};
  apply_frequency_presence_penalty(favoured, once, -1.0, 0.0);
  EXPECT_FLOAT_EQ(favoured[1], 1.0f);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOnlyTheGeneratedIds) {
  SamplerOptions options;
  options.repeat_penalty = 1.0;
  options.presence_penalty = 1.0;
  Sampler sampler(options);
  // Id 0 is in the prompt (the first two ids) only: not penalised, it stays the largest.
  std::vector<float> logits = {1.0f, 0.8f, 0.9f};
  EXPECT_EQ(sampler.sample(logits, {0, 0, 2}, 2), 0u);
  // Counted from the start of the history, the prompt's id 0 loses its lead.
  std::vector<float> whole = {1.0f, 0.8f, 0.9f};
  EXPECT_EQ(sampler.sample(whole, {0, 0, 2}, 0), 1u);
}

TEST(Sampler, GreedyPicksTheLargestLogitAfterThePenalty) {
  SamplerOptions options;
  options.repeat_penalty = 1.5;
  Sampler sampler(options);
  std::vector<float> logits = {1.0f, 1.4f, 0.2f};
  // Id 1 was generated before: 1.4 / 1.5 < 1.0, so id 0 wins.
  EXPECT_EQ(sampler.sample(logits, {1}), 0u);
  std::vector<float> fresh = {1.0f, 1.4f, 0.2f};
  EXPECT_EQ(sampler.sample(fresh, {}), 1u);
}

TEST(Sampler, GreedyOverALargeVocabularyTakesTheFirstOfTiedLargestLogits) {
  Sampler sampler(SamplerOptions{});
  // Gemma 3's vocabulary size; the largest value twice, past any vector width, and once at the
  // very end (a vector loop's tail).
  std::vector<float> logits(262144);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 1000) * 1e-3f;
  logits[100003] = 5.0f;
  logits[200017] = 5.0f;
  std::vector<float> copy = logits;
  EXPECT_EQ(sampler.sample(copy, {}), 100003u);
  logits.back() = 6.0f;
  EXPECT_EQ(sampler.sample(logits, {}), 262143u);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplerOptions options = at_temperature(5.0);
  options.top_k = 1;
  Sampler sampler(options);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {0.1f, 0.3f, 0.2f};
    EXPECT_EQ(sampler.sample(logits, {}), 1u);
  }
}

TEST(Sampler, SameSeedGivesTheSameSequence) {
  SamplerOptions options = at_temperature(1.0);
  Sampler first(options);
  Sampler second(options);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> a = {0.0f, 0.5f, 1.0f, 0.2f};
    std::vector<float> b = a;
    EXPECT_EQ(first.sample(a, {}), second.sample(b, {}));
  }
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTheTemperature) {
  SamplerOptions options = at_temperature(2.0);
  Sampler sampler(options);
  std::vector<float> base = {0.0f, 1.0f, 2.0f};
  // Independent expectation: exp(l / T) normalised.
  double weights[3] = {std::exp(0.0), std::exp(0.5), std::exp(1.0)};
  double total = weights[0] + weights[1] + weights[2];
  std::map<uint32_t, int> counts;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> logits = base;
    ++counts[sampler.sample(logits, {})];
  }
  for (uint32_t id = 0; id < 3; ++id) {
    EXPECT_NEAR(counts[id] / double(draws), weights[id] / total, 0.02) << "id " << id;
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingTheMass) {
  SamplerOptions options = at_temperature(1.0);
  options.top_p = 0.5;
  Sampler sampler(options);
  // Probabilities about 0.665, 0.245, 0.09: the top id alone reaches 0.5.
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = {2.0f, 1.0f, 0.0f};
    EXPECT_EQ(sampler.sample(logits, {}), 0u);
  }
}

TEST(Sampler, TopPOverAWideVocabularyDrawsFromTheSortedPrefixInItsProportions) {
  // One id at logit 20 (about 3/4 of the mass) and 4,095 at 12 down to 8 in a shuffled order:
  // the prefix reaching 0.9 takes the top id and hundreds of the others, 8 nats and more below
  // it, so it spans weight scales far apart. The reference ranks everything in double.
  SamplerOptions options = at_temperature(1.0);
  options.top_p = 0.9;
  Sampler sampler(options);
  const size_t vocab = 4096;
  std::vector<uint32_t> ranked(vocab);  // Ids, largest logit first.
  for (uint32_t id = 0; id < vocab; ++id) ranked[id] = id;
  std::mt19937 shuffle(7);
  std::shuffle(ranked.begin(), ranked.end(), shuffle);
  std::vector<float> base(vocab);
  base[ranked[0]] = 20.0f;
  for (size_t rank = 1; rank < vocab; ++rank) {
    base[ranked[rank]] = 12.0f - 4.0f * static_cast<float>(rank - 1) / vocab;
  }
  double total = 0;
  for (float logit : base) total += std::exp(static_cast<double>(logit));
  size_t prefix = 0;
  double mass = 0;
  while (mass < options.top_p) mass += std::exp(static_cast<double>(base[ranked[prefix++]])) / total;
  ASSERT_GT(prefix, 100u);
  const double top_share = std::exp(20.0) / total / mass;
  std::vector<int> counts(vocab);
  const int draws = 5000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> logits = base;
    ++counts[sampler.sample(logits, {})];
  }
  int inside = 0, last_quarter = 0;
  for (size_t rank = 0; rank < prefix; ++rank) {
    inside += counts[ranked[rank]];
    if (rank >= prefix * 3 / 4) last_quarter += counts[ranked[rank]];
  }
  EXPECT_EQ(inside, draws);         // Nothing beyond the prefix,
  EXPECT_GT(last_quarter, 0);       // all of it reachable,
  EXPECT_NEAR(counts[ranked[0]] / double(draws), top_share, 0.02);  // in proportion.
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplerOptions options = at_temperature(1.0);
  options.min_p = 0.2;
  Sampler sampler(options);
  // p(2) / p(0) = e^-3 < 0.2, so id 2 is never drawn; p(1) / p(0) = e^-1 > 0.2 stays.
  std::map<uint32_t, int> counts;
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> logits = {3.0f, 2.0f, 0.0f};
    ++counts[sampler.sample(logits, {})];
  }
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[1], 0);
}

TEST(Sampler, RejectsInvalidOptions) {
  SamplerOptions options;
  options.top_p = 0.0;
  EXPECT_THROW(Sampler{options}, Error);
  options = SamplerOptions();
  options.temperature = -1;
  EXPECT_THROW(Sampler{options}, Error);
}

}  // namespace
}  // namespace fornace
