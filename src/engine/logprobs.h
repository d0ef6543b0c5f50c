// Log-probabilities of sampled tokens: the log-softmax of the model's logits at the chosen id and
// at the most likely ids, as OpenAI's `logprobs` and `top_logprobs` report them.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace fornace {

struct TokenLogprob {
  uint32_t id = 0;
  double logprob = 0;
  std::vector<std::pair<uint32_t, double>> top;  // Most likely first; ties by lower id.
};

// The log-softmax of `logits` at `chosen`, and the `top` most likely ids with theirs.
TokenLogprob token_logprob(std::span<const float> logits, uint32_t chosen, int64_t top);

}  // namespace fornace
