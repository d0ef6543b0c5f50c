// The sampler: penalty, then greedy or filtered temperature sampling.
#include "engine/sampler.h"

#include <algorithm>

#include "core/error.h"
#include "cpu/elementwise.h"

namespace fornace {

void apply_repeat_penalty(std::span<float> logits, const std::vector<uint32_t>& history,
                          double penalty, int64_t last_n) {
  if (penalty == 1.0 || last_n <= 0) return;
  size_t begin = history.size() > static_cast<size_t>(last_n) ? history.size() - last_n : 0;
  for (size_t i = begin; i < history.size(); ++i) {
    uint32_t id = history[i];
    // An id counts once: skip it when it already appeared earlier in the window. The window is
    // short (64 by default), so this scan is cheaper than a set and allocates nothing per step.
    bool repeated = std::find(history.begin() + begin, history.begin() + i, id) !=
                    history.begin() + i;
    if (id >= logits.size() || repeated) continue;
    float& logit = logits[id];
    logit = logit >= 0 ? static_cast<float>(logit / penalty) : static_cast<float>(logit * penalty);
  }
}

void apply_frequency_presence_penalty(std::span<float> logits,
                                      std::span<const uint32_t> generated, double frequency,
                                      double presence) {
  if ((frequency == 0 && presence == 0) || generated.empty()) return;
  // Sorted, so that each distinct id is one run: its length is the id's count.
  std::vector<uint32_t> ids(generated.begin(), generated.end());
  std::sort(ids.begin(), ids.end());
  for (size_t run = 0; run < ids.size();) {
    size_t end = run;
    while (end < ids.size() && ids[end] == ids[run]) ++end;
    if (ids[run] < logits.size()) {
      logits[ids[run]] -= static_cast<float>(static_cast<double>(end - run) * frequency + presence);
    }
    run = end;
  }
}

Sampler::Sampler(const SamplerOptions& options) : options_(options), generator_(options.seed) {
  if (options.temperature < 0) fail("sampler: temperature must be >= 0");
  if (options.repeat_penalty <= 0) fail("sampler: repeat penalty must be > 0");
  if (options.top_p <= 0 || options.top_p > 1) fail("sampler: top-p must be in (0, 1]");
  if (options.min_p < 0 || options.min_p >= 1) fail("sampler: min-p must be in [0, 1)");
  if (options.constraint) constrained_ = options.constraint->start();
}

namespace {

// Orders candidates largest logit first, the lower id first among equal logits.
auto largest_first(std::span<const float> logits) {
  return [logits](const auto& left, const auto& right) {
    return logits[left.id] > logits[right.id] ||
           (logits[left.id] == logits[right.id] && left.id < right.id);
  };
}

}  // namespace

uint32_t Sampler::sample(std::span<float> logits, const std::vector<uint32_t>& history,
                         size_t generated_from) {
  if (logits.empty()) fail("sampler: no logits");
  apply_repeat_penalty(logits, history, options_.repeat_penalty, options_.repeat_last_n);
  generated_from = std::min(generated_from, history.size());
  apply_frequency_presence_penalty(
      logits, std::span<const uint32_t>(history).subspan(generated_from),
      options_.frequency_penalty, options_.presence_penalty);
  if (!constrained_) return pick(logits);
  constrained_->mask(logits);
  const uint32_t id = pick(logits);
  constrained_->accept(id);
  return id;
}

uint32_t Sampler::pick(std::span<const float> logits) {
  const size_t vocab = logits.size();
  if (options_.temperature == 0.0) {
    // The first largest logit (vectorized: a 262k vocabulary is a megabyte per step).
    return static_cast<uint32_t>(cpu::argmax_row(logits.data(), static_cast<int64_t>(vocab)));
  }
  candidates_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) candidates_[i] = {static_cast<uint32_t>(i), 0.0};
  // Nothing is sorted: candidates are selected in linear time (a sort of the vocabulary cost
  // more than a forward pass), and a draw needs no order. top-k keeps the k largest.
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < vocab) {
    const auto kept_end = candidates_.begin() + options_.top_k;
    std::nth_element(candidates_.begin(), kept_end - 1, candidates_.end(),
                     largest_first(logits));
    candidates_.resize(static_cast<size_t>(options_.top_k));
  }
  // Softmax at the temperature over the vocabulary (vectorized, in f32), renormalized over the
  // candidates; the largest logit is always one of them.
  const auto count_all = static_cast<int64_t>(vocab);
  probabilities_.resize(vocab);
  cpu::scale_run(logits.data(), static_cast<float>(1.0 / options_.temperature),
                 probabilities_.data(), count_all);
  cpu::softmax_row(probabilities_.data(), probabilities_.data(), count_all);
  double total = 0;
  for (Candidate& candidate : candidates_) {
    candidate.weight = probabilities_[candidate.id];
    total += candidate.weight;
  }
  for (Candidate& candidate : candidates_) candidate.weight /= total;
  // min-p: drop candidates below min_p times the largest probability (the largest logit is a
  // candidate); the largest stays, min_p being below 1.
  if (options_.min_p > 0) {
    const double floor =
        options_.min_p * std::max_element(candidates_.begin(), candidates_.end(),
                                          [](const Candidate& left, const Candidate& right) {
                                            return left.weight < right.weight;
                                          })->weight;
    std::erase_if(candidates_, [floor](const Candidate& each) { return each.weight < floor; });
  }
  // top-p: the fewest candidates, largest first, whose mass reaches top_p.
  const size_t count = options_.top_p < 1.0 ? select_top_mass(logits, options_.top_p)
                                            : candidates_.size();
  double kept = 0;
  for (size_t i = 0; i < count; ++i) kept += candidates_[i].weight;
  double target = std::uniform_real_distribution<double>(0.0, kept)(generator_);
  for (size_t i = 0; i < count; ++i) {
    target -= candidates_[i].weight;
    if (target <= 0) return candidates_[i].id;
  }
  return candidates_[count - 1].id;
}

size_t Sampler::select_top_mass(std::span<const float> logits, double mass) {
  const auto before = largest_first(logits);
  // Quickselect on mass: [begin, first) is in the prefix (its mass `taken` short of `mass`),
  // [last, end) is not; each pass splits what lies between around a pivot.
  auto first = candidates_.begin();
  auto last = candidates_.end();
  double taken = 0;
  while (last - first > 1) {
    const Candidate pivot = first[(last - first) / 2];
    auto middle = std::partition(first, last, [&](const Candidate& each) {
      return before(each, pivot);
    });
    double upper = 0;
    for (auto each = first; each != middle; ++each) upper += each->weight;
    if (taken + upper >= mass) {
      last = middle;  // The prefix ends among those before the pivot.
      continue;
    }
    taken += upper;
    std::iter_swap(middle, std::find_if(middle, last, [&](const Candidate& each) {
                     return each.id == pivot.id;
                   }));
    taken += middle->weight;
    first = middle + 1;
    if (taken >= mass) return static_cast<size_t>(first - candidates_.begin());
  }
  // One candidate left at most: the one that reaches the mass (all of them, if rounding left the
  // total short of it).
  return static_cast<size_t>(last - candidates_.begin());
}

}  // namespace fornace
