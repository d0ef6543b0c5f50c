// Software prefetch for kernels that do so much arithmetic per weight byte that the core keeps
// too few loads in flight for the hardware prefetcher alone (batched and quantized GEMV).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fornace::cpu {

// How far ahead of the bytes in use a single row's weight stream is prefetched, into L2.
constexpr int64_t kWeightPrefetchBytes = 4 << 10;

// Where prefetched lines go.
enum class PrefetchInto { l1 = 3, l2 = 2 };

// Prefetches every 64-byte line that `Bytes` bytes from `address` touch, at most.
template <size_t Bytes, PrefetchInto Into = PrefetchInto::l1>
inline void prefetch_lines(const void* address) {
  const char* start = static_cast<const char*>(address);
  for (size_t offset = 0; offset < Bytes; offset += 64) {
    __builtin_prefetch(start + offset, 0, static_cast<int>(Into));
  }
}

}  // namespace fornace::cpu
