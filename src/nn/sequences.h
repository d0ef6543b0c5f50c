// The sequences one forward pass runs: a single sequence of S tokens after what its KV cache holds
// (a prompt chunk or a decode step), or B sequences of one token each, each with its own cache (a
// batched decode step, as a server decodes its active requests together).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "nn/kv_cache.h"

namespace fornace {

class Sequences {
 public:
  // The most sequences one batched pass runs.
  static constexpr int64_t kMaxBatch = 64;

  // Every row of the pass belongs to `cache`, at positions cache.length() onwards.
  explicit Sequences(KvCacheSet& cache);
  // Row b is one token of caches[b], at position caches[b]->length(). Throws Error for an empty
  // batch, more than kMaxBatch, or caches that repeat.
  explicit Sequences(std::span<KvCacheSet* const> caches);

  bool batched() const { return batched_; }
  // Sequences in the pass: 1, or B when batched.
  int64_t count() const { return count_; }
  KvCacheSet& cache(int64_t sequence) const { return *caches_[sequence]; }
  // The position of the sequence's first row in this pass (its cache's length before the pass).
  int64_t start(int64_t sequence) const { return starts_[sequence]; }

 private:
  bool batched_ = false;
  int64_t count_ = 0;
  std::array<KvCacheSet*, kMaxBatch> caches_{};
  std::array<int64_t, kMaxBatch> starts_{};
};

}  // namespace fornace
