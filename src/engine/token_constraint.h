// What restricts the ids a sampler may pick (structured outputs): a TokenConstraint, shared and
// unchanging, starts one ConstrainedSequence per sampler, which masks the logits before each pick
// and follows the id picked.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace fornace {

class ConstrainedSequence {
 public:
  virtual ~ConstrainedSequence() = default;
  // Sets the logits of the ids that may not come next to -infinity (at least one id stays).
  virtual void mask(std::span<float> logits) = 0;
  // Advances past `id`, the one picked.
  virtual void accept(uint32_t id) = 0;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The progress of one sequence from its start (each of a request's choices has its own).
  virtual std::unique_ptr<ConstrainedSequence> start() const = 0;
};

}  // namespace fornace
