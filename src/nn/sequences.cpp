// Sequences of a forward pass: their caches and start positions, checked.
#include "nn/sequences.h"

#include "core/error.h"

namespace fornace {

Sequences::Sequences(KvCacheSet& cache) : count_(1) {
  caches_[0] = &cache;
  starts_[0] = cache.length();
}

Sequences::Sequences(std::span<KvCacheSet* const> caches)
    : batched_(true), count_(static_cast<int64_t>(caches.size())) {
  if (caches.empty() || count_ > kMaxBatch) {
    fail("a batched pass runs 1 to ", kMaxBatch, " sequences, not ", caches.size());
  }
  for (int64_t index = 0; index < count_; ++index) {
    for (int64_t earlier = 0; earlier < index; ++earlier) {
      if (caches[earlier] == caches[index]) {
        fail("a batched pass got the same KV cache for sequences ", earlier, " and ", index);
      }
    }
    caches_[index] = caches[index];
    starts_[index] = caches[index]->length();
  }
}

}  // namespace fornace
