// Log-softmax at a few ids: one pass for the maximum, one for the sum, a bounded heap for the top.
#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace fornace {

TokenLogprob token_logprob(std::span<const float> logits, uint32_t chosen, int64_t top) {
  if (chosen >= logits.size()) fail("logprobs: token ", chosen, " is outside the logits");
  double maximum = -INFINITY;
  for (float logit : logits) maximum = std::max<double>(maximum, logit);
  double sum = 0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) - maximum);
  const double log_sum = maximum + std::log(sum);

  TokenLogprob result;
  result.id = chosen;
  result.logprob = logits[chosen] - log_sum;
  const size_t count = std::min<size_t>(std::max<int64_t>(top, 0), logits.size());
  // A min-heap of the best `count` so far: the root is the one to drop next.
  auto better = [&](uint32_t a, uint32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<uint32_t> heap;
  heap.reserve(count + 1);
  for (uint32_t id = 0; id < logits.size() && count > 0; ++id) {
    if (heap.size() == count && !better(id, heap.front())) continue;
    heap.push_back(id);
    std::push_heap(heap.begin(), heap.end(), better);
    if (heap.size() > count) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.pop_back();
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  for (uint32_t id : heap) result.top.emplace_back(id, logits[id] - log_sum);
  return result;
}

}  // namespace fornace
