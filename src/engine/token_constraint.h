// What restricts the ids a sampler may pick (structured outputs): it masks the logits before each
// pick and follows the id picked.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace fornace {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of the ids that may not come next to -infinity (at least one id stays).
  virtual void mask(std::vector<float>& logits) = 0;
  // Advances past `id`, the one picked.
  virtual void accept(uint32_t id) = 0;
  // The same constraint at its start, for another completion of the same request.
  virtual std::shared_ptr<TokenConstraint> restarted() const = 0;
};

}  // namespace fornace
