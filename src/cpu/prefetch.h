// Software prefetch for kernels that do so much arithmetic per weight byte that the core keeps
// too few loads in flight for the hardware prefetcher alone (batched and quantized GEMV).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fornace::cpu {

// How far ahead of the bytes in use the weight stream is prefetched.
constexpr int64_t kWeightPrefetchBytes = 16 << 10;

// Prefetches, into L1, every 64-byte line that `bytes` bytes from `address` touch, at most.
template <size_t Bytes>
inline void prefetch_lines(const void* address) {
  const char* start = static_cast<const char*>(address);
  for (size_t offset = 0; offset < Bytes; offset += 64) __builtin_prefetch(start + offset, 0, 3);
}

}  // namespace fornace::cpu
