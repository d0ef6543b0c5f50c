// Token sampling: repeat penalty as HF and Candle apply it, OpenAI's frequency and presence
// penalties, then greedy or temperature with top-k, top-p and min-p filters and a seeded generator.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/token_constraint.h"

namespace fornace {

struct SamplerOptions {
  double temperature = 0.0;  // 0: greedy.
  int64_t top_k = 0;         // 0: off.
  double top_p = 1.0;        // 1: off.
  double min_p = 0.0;        // 0: off.
  double repeat_penalty = 1.1;
  int64_t repeat_last_n = 64;
  // OpenAI's penalties over the generated ids: logit -= count * frequency + (count > 0) * presence.
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;
  uint64_t seed = 299792458;
  // Structured outputs: each sampler starts its own sequence of it, which masks the logits
  // (after the penalties) and follows each id picked.
  std::shared_ptr<const TokenConstraint> constraint;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // Picks the next id from `logits` (modified in place by the penalties) given the ids so far;
  // the ids from `history[generated_from]` on are the generated ones that the frequency and
  // presence penalties count.
  uint32_t sample(std::span<float> logits, const std::vector<uint32_t>& history,
                  size_t generated_from = 0);
  const SamplerOptions& options() const { return options_; }

 private:
  struct Candidate {
    uint32_t id;
    double weight;  // Probability, once the softmax has run.
  };
  // Greedy or filtered temperature sampling from the penalized (and masked) logits.
  uint32_t pick(std::span<const float> logits);
  // Moves the fewest candidates, largest logit first, whose weights reach `mass` to the front
  // of candidates_, in no particular order, in expected linear time; returns how many.
  size_t select_top_mass(std::span<const float> logits, double mass);

  SamplerOptions options_;
  std::unique_ptr<ConstrainedSequence> constrained_;
  std::mt19937_64 generator_;
  std::vector<Candidate> candidates_;  // Scratch.
  std::vector<float> probabilities_;   // Scratch: the softmax over the vocabulary.
};

// For each distinct id among the last `last_n` of `history`: a positive logit is divided by
// `penalty`, a negative one multiplied by it.
void apply_repeat_penalty(std::span<float> logits, const std::vector<uint32_t>& history,
                          double penalty, int64_t last_n);

// OpenAI's penalties: for each distinct id of `generated`, seen `count` times, the logit loses
// count * frequency + presence.
void apply_frequency_presence_penalty(std::span<float> logits,
                                      std::span<const uint32_t> generated, double frequency,
                                      double presence);

}  // namespace fornace
