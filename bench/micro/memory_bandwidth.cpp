// The machine's streaming read bandwidth: the roofline for decode (a GEMV reads each weight once).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kBufferBytes = int64_t{1} << 30;

// Sums 64-bit words with eight independent accumulators (vectorized by the compiler).
uint64_t read_portable(const uint64_t* words, int64_t count) {
  uint64_t sums[8] = {};
  for (int64_t index = 0; index + 8 <= count; index += 8) {
    for (int lane = 0; lane < 8; ++lane) sums[lane] += words[index + lane];
  }
  uint64_t total = 0;
  for (uint64_t sum : sums) total += sum;
  return total;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint64_t* words, int64_t count) {
  __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                     _mm256_setzero_si256()};
  const __m256i* vectors = reinterpret_cast<const __m256i*>(words);
  for (int64_t index = 0; index + 4 <= count / 4; index += 4) {
    for (int lane = 0; lane < 4; ++lane) {
      sums[lane] = _mm256_add_epi64(sums[lane], _mm256_load_si256(vectors + index + lane));
    }
  }
  __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(sums[0], sums[1]), _mm256_add_epi64(sums[2], sums[3]));
  uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

uint64_t read_words(const uint64_t* words, int64_t count) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return read_avx2(words, count);
#endif
  return read_portable(words, count);
}

void BM_StreamingRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  fornace::set_num_threads(threads);
  const int64_t count = kBufferBytes / sizeof(uint64_t);
  static std::unique_ptr<uint64_t[], decltype(&std::free)> buffer(
      static_cast<uint64_t*>(std::aligned_alloc(4096, kBufferBytes)), &std::free);
  static bool filled = [] {
    std::memset(buffer.get(), 1, kBufferBytes);
    return true;
  }();
  benchmark::DoNotOptimize(filled);
  // One contiguous part per thread, split on 4 KiB boundaries.
  const int64_t pages = kBufferBytes / 4096;
  for (auto _ : state) {
    std::vector<uint64_t> sums(threads, 0);
    fornace::ThreadPool::global().run(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) {
        int64_t first = pages * part / threads * (4096 / sizeof(uint64_t));
        int64_t last = pages * (part + 1) / threads * (4096 / sizeof(uint64_t));
        sums[part] = read_words(buffer.get() + first, last - first);
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kBufferBytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  fornace::set_num_threads(0);
}

double minimum(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}
double maximum(const std::vector<double>& values) {
  return *std::max_element(values.begin(), values.end());
}

BENCHMARK(BM_StreamingRead)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

}  // namespace
