// The machine's streaming read bandwidth, the roofline for decode, beside the BF16 GEMV over the
// same bytes (a decode step is such GEMVs), in 4 KiB and 2 MiB pages.
#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "roofs/probes.h"
#include "cpu/thread_pool.h"
#include "range_statistics.h"

namespace {

constexpr int64_t kBufferBytes = int64_t{1} << 30;

// A 1 GiB buffer at a 2 MiB boundary, filled, in 4 KiB pages or (where the kernel gives them)
// 2 MiB pages, as the weights are mapped.
const uint64_t* buffer_with_pages(bool huge) {
  constexpr int64_t kHugePage = int64_t{2} << 20;
  void* reservation = mmap(nullptr, kBufferBytes + kHugePage, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reservation == MAP_FAILED) return nullptr;
  auto* aligned = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(reservation) + kHugePage - 1) & ~uintptr_t(kHugePage - 1));
  madvise(aligned, kBufferBytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  std::memset(aligned, 1, kBufferBytes);
  return reinterpret_cast<const uint64_t*>(aligned);
}

// Args: threads, 2 MiB pages (0 or 1).
void BM_StreamingRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool huge = state.range(1) != 0;
  fornace::set_num_threads(threads);
  static const uint64_t* buffers[2] = {buffer_with_pages(false), buffer_with_pages(true)};
  const uint64_t* buffer = buffers[huge];
  if (!buffer) {
    state.SkipWithError("mmap of 1 GiB failed");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(fornace::roofs::stream_read(buffer, kBufferBytes));
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kBufferBytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.counters["huge_pages"] = huge;
  fornace::set_num_threads(0);
}

// The same 1 GiB as bf16 weights [599,186 x 896] (hidden size of Qwen2.5-0.5B), one input row:
// what decode's GEMV reaches of the streaming read. Args: threads, 2 MiB pages (0 or 1).
void BM_GemvRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool huge = state.range(1) != 0;
  fornace::set_num_threads(threads);
  constexpr int64_t kDepth = 896;
  constexpr int64_t kOutputs = kBufferBytes / (kDepth * 2);
  static const uint64_t* buffers[2] = {buffer_with_pages(false), buffer_with_pages(true)};
  if (!buffers[huge]) {
    state.SkipWithError("mmap of 1 GiB failed");
    return;
  }
  std::vector<float> input(kDepth, 0.5f);
  std::vector<float> output(kOutputs);
  fornace::cpu::LinearProblem problem{};
  problem.input = input.data();
  problem.input_stride = kDepth;
  problem.rows = 1;
  problem.depth = kDepth;
  problem.weight = buffers[huge];
  problem.weight_dtype = fornace::DType::bf16;
  problem.weight_stride = kDepth;
  problem.outputs = kOutputs;
  problem.output = output.data();
  problem.output_stride = kOutputs;
  for (auto _ : state) {
    fornace::cpu::linear(problem);
    benchmark::DoNotOptimize(output.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kOutputs * kDepth * 2) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.counters["huge_pages"] = huge;
  state.SetLabel(fornace::cpu::isa_name(fornace::cpu::active_isa()));
  fornace::set_num_threads(0);
}

using fornace::micro::minimum;
using fornace::micro::maximum;

// 1 and 2 threads, 4 KiB and 2 MiB pages, wall time, with the range beside the mean.
void threads_and_pages(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"threads", "huge_pages"})
      ->ArgsProduct({{1, 2}, {0, 1}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->ComputeStatistics("min", minimum)
      ->ComputeStatistics("max", maximum);
}

BENCHMARK(BM_GemvRead)->Apply(threads_and_pages);
BENCHMARK(BM_StreamingRead)->Apply(threads_and_pages);

}  // namespace
