// How decode kernels keep enough weight loads in flight, per vendor: software prefetch (batched
// and quantized GEMV) and several row streams a core (quantized GEMV).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/cpu_features.h"

namespace fornace::cpu {

// Whether the CPU is Intel, read once: the decode kernels ask per tile of rows.
inline const bool kIntelCpu = cpu_features().intel;
// Whether it is AMD family 19h: Zen 4 (Zen 3 has no AVX-512, and its AVX2 kernels prefetch
// nothing on AMD).
inline const bool kAmdFamily19h = !kIntelCpu && cpu_features().family == 0x19;

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

// How a decode kernel prefetches each weight row's stream, as measured per CPU and level: on
// Zen 5 into L1 at the kernel's own distance, or not at all where it gives none; on Zen 4 not
// at all with AVX-512 (decode steps alternating with and without, 3 runs of 127 steps, median
// ratios: Q8_0 +10 %, Q5_1 +7.5 %, Q4_K_M +6 %, Q4_0 +3 %, BF16 1.00; into L2 3 or 8 KiB
// ahead was slower than none: Q8_0 0.89, 0.78), into L2 as on Intel with AVX2 (below); on
// Intel (model 167) into L2, 3 KiB ahead (1-16 KiB into L1 were no faster than none). Synthetic
// 0.5B decode, paired: AVX-512 against L1, Q4_0 +14-18 %, Q8_0 +12-14 %, Q4_K_M +16-20 %,
// Q5_K_M +10-12 %; AVX2 against none, Q4_0 29 -> 59 tok/s, Q8_0 25 -> 48, Q4_K_M 22 -> 48.
// 3 KiB against 4 KiB (the decode kernels reading 4 rows a pass, 3 alternations): the 1.5B's
// Q4_K 27.7-28.1 -> 29.9-31.0 tok/s, Q5_K 23.0-23.6 -> 23.3-24.1, Q8_0 17.8-18.1 -> 18.0-18.2; the
// 0.5B's Q4_0 84.7-86.4 -> 87.4-89.6, Q4_K_M 74.3-74.8 -> 75.6-76.0, BF16 27.7-28.1 -> 27.4-28.1;
// Q6_K 17.5-21.0 both.
struct StreamPrefetch {
  bool into_l2 = false;
  int64_t bytes_ahead = 0;  // 0: no software prefetch

  // Prefetches the lines of `Bytes` bytes bytes_ahead beyond `position`.
  template <size_t Bytes>
  void lines(const void* position) const {
    if (bytes_ahead == 0) return;
    const char* ahead = static_cast<const char*>(position) + bytes_ahead;
    if (into_l2) {
      prefetch_lines<Bytes, PrefetchInto::l2>(ahead);
    } else {
      prefetch_lines<Bytes>(ahead);
    }
  }

  // Prefetches a stream's first min(bytes, bytes_ahead) bytes from `start`, which lines() never
  // reaches: it runs bytes_ahead beyond where the kernel reads.
  void head(const void* start, int64_t bytes) const {
    if (into_l2) {
      head_into<PrefetchInto::l2>(start, bytes);
    } else {
      head_into<PrefetchInto::l1>(start, bytes);
    }
  }

 private:
  template <PrefetchInto Into>
  void head_into(const void* start, int64_t bytes) const {
    const char* first = static_cast<const char*>(start);
    const int64_t end = std::min(bytes, bytes_ahead);
    for (int64_t offset = 0; offset < end; offset += 64) {
      __builtin_prefetch(first + offset, 0, static_cast<int>(Into));
    }
  }
};

// Whether decode kernels of level `isa` (one input row) read 4 weight rows at once, each its own
// sequential stream a quarter of the rows apart and prefetched into L2 3 KiB ahead: on Intel
// (model 167: micro-quant-matmul, 2 threads, gate_proj Q4_0 25.3-25.7 -> 32.6-32.7 GB/s, Q5_0
// 24.5-25.0 -> 32.3-33.7, Q8_0 31.3-31.4 -> 36.7-37.6; the model, paired: Q4_0 75.4-75.6 ->
// 86.8-88.7 tok/s, Q8_0 51.2-52.0 -> 56.2-56.8, the 1.5B's Q4_K 24.2-24.5 -> 26.4-26.9, Q5_K and
// Q6_K within noise) and on Zen 4 with AVX2 (steps alternating with Zen 4's AVX-512 plan, 2 runs:
// Q4_0 +20 %, Q8_0 +10 %, Q4_K_M +5.5 %, Q5_0 +5 %; with AVX-512 it was slower: Q4_0 0.80,
// Q4_K_M 0.89, Q8_0 0.94). Elsewhere one row at a time: Zen 5's measured plan.
inline bool streams_rows(Isa isa) { return kIntelCpu || (kAmdFamily19h && isa == Isa::avx2); }

// The plan of a kernel of level `isa`; `l1_bytes_ahead` is its distance on Zen 5, into L1
// (0: none).
inline StreamPrefetch stream_prefetch(Isa isa, int64_t l1_bytes_ahead) {
  if (streams_rows(isa)) return {true, int64_t{3} << 10};
  if (kAmdFamily19h) return {};
  return {false, l1_bytes_ahead};
}

// Where decode at level `isa` reads several rows a pass (streams_rows), `streams` of them, and
// each stream holds at least 8 rows: pass(first, spacing) for first in [0, rows / streams), each
// pass reading rows first, first + spacing, ...; returns the rows done (0 otherwise), the rest
// being the caller's. The rows lie `row_bytes` apart from `weights`. The kernels prefetch each
// stream bytes_ahead beyond where they read, so the streams' first bytes_ahead bytes are prefetched
// here first: every part of a decode op starts 4 cold streams. AVX2, 2 threads, paired, 3
// alternations: micro-quant-matmul interleaved Q5_0 q_proj 21.5-23.2 -> 19.9-20.9 us, gate_proj
// 98.0-101 -> 91.9-95.1, Q4_0 q_proj 18.6-19.6 -> 17.9-19.0; synthetic 0.5B decode (4
// alternations, medians) Q4_0 81.1 -> 83.1 tok/s, Q4_K_M 64.5 -> 67.0, Q5_K_M 59.9 -> 61.5, Q8_0
// and Q5_0 +1 %. AVX-512: within noise.
template <typename Pass>
int64_t run_row_streams(Isa isa, const void* weights, size_t row_bytes, int64_t rows, int streams,
                        Pass&& pass) {
  const int64_t spacing = rows / streams;
  if (!streams_rows(isa) || spacing < 8) return 0;
  const StreamPrefetch prefetch = stream_prefetch(isa, 0);
  const int64_t stream_bytes = spacing * static_cast<int64_t>(row_bytes);
  for (int stream = 0; stream < streams; ++stream) {
    prefetch.head(static_cast<const char*>(weights) + stream * stream_bytes, stream_bytes);
  }
  for (int64_t first = 0; first < spacing; ++first) pass(first, spacing);
  return streams * spacing;
}

}  // namespace fornace::cpu
