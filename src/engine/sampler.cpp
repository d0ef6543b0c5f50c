// The sampler: penalty, then greedy or filtered temperature sampling.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cpu/elementwise.h"

namespace fornace {

void apply_repeat_penalty(std::vector<float>& logits, const std::vector<uint32_t>& history,
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

void apply_frequency_presence_penalty(std::vector<float>& logits,
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
}

uint32_t Sampler::sample(std::vector<float>& logits, const std::vector<uint32_t>& history,
                         size_t generated_from) {
  if (logits.empty()) fail("sampler: no logits");
  apply_repeat_penalty(logits, history, options_.repeat_penalty, options_.repeat_last_n);
  generated_from = std::min(generated_from, history.size());
  apply_frequency_presence_penalty(
      logits, std::span<const uint32_t>(history).subspan(generated_from),
      options_.frequency_penalty, options_.presence_penalty);
  if (options_.temperature == 0.0) {
    // The first largest logit (vectorized: a 262k vocabulary is a megabyte per step).
    return static_cast<uint32_t>(
        cpu::argmax_row(logits.data(), static_cast<int64_t>(logits.size())));
  }
  // Candidates sorted by logit, largest first; top-k keeps the first k.
  size_t vocab = logits.size();
  size_t keep = options_.top_k > 0 ? std::min<size_t>(options_.top_k, vocab) : vocab;
  order_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) order_[i] = static_cast<uint32_t>(i);
  auto by_logit = [&](uint32_t left, uint32_t right) {
    return logits[left] > logits[right] || (logits[left] == logits[right] && left < right);
  };
  std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
  order_.resize(keep);
  // Softmax at the temperature over the candidates.
  double top = logits[order_[0]];
  weights_.resize(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    weights_[i] = std::exp((logits[order_[i]] - top) / options_.temperature);
    total += weights_[i];
  }
  for (double& weight : weights_) weight /= total;
  // min-p: drop candidates below min_p times the largest probability.
  size_t count = keep;
  if (options_.min_p > 0) {
    double floor = options_.min_p * weights_[0];
    while (count > 1 && weights_[count - 1] < floor) --count;
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1.0) {
    double mass = 0;
    for (size_t i = 0; i < count; ++i) {
      mass += weights_[i];
      if (mass >= options_.top_p) {
        count = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < count; ++i) kept += weights_[i];
  double target = std::uniform_real_distribution<double>(0.0, kept)(generator_);
  for (size_t i = 0; i < count; ++i) {
    target -= weights_[i];
    if (target <= 0) return order_[i];
  }
  return order_[count - 1];
}

}  // namespace fornace
