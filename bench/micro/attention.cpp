// Attention microbenchmarks: Qwen2.5-0.5B decode (Sq 1, 14 query heads, 2 kv heads, D 64) over
// the three KV cache layouts, reported as µs per call, GB/s of K and V read and GFLOP/s; causal
// prefill (the model's layouts: Q contiguous, K contiguous, V a transposed view) as GFLOP/s. On
// a shared machine compare the CPU column of single-thread runs, and take medians of
// --benchmark_repetitions.
#include <benchmark/benchmark.h>

#include <cmath>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {
namespace {

constexpr int64_t kQueryHeads = 14;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kCapacity = 4096;  // Positions in the preallocated cache.

enum CacheLayout : int64_t { kContiguous = 0, kTransposedValue = 1, kNarrowedPrealloc = 2 };

const char* layout_name(int64_t layout) {
  switch (layout) {
    case kContiguous:
      return "contiguous";
    case kTransposedValue:
      return "cat (V transposed view)";
    default:
      return "prealloc (narrowed)";
  }
}

// K and V of `length` positions as each KV cache kind hands them to attention.
std::pair<Tensor, Tensor> make_cache(int64_t layout, int64_t length) {
  switch (layout) {
    case kContiguous:
      return {randn({1, kKvHeads, length, kHeadDim}, 1), randn({1, kKvHeads, length, kHeadDim}, 2)};
    case kTransposedValue:
      // cat keeps K contiguous (RoPE writes it) and V as [B, S, H, D] viewed as [B, H, S, D].
      return {randn({1, kKvHeads, length, kHeadDim}, 1),
              randn({1, length, kKvHeads, kHeadDim}, 2).transpose(1, 2)};
    default:
      return {randn({1, kKvHeads, kCapacity, kHeadDim}, 1).narrow(2, 0, length),
              randn({1, kKvHeads, kCapacity, kHeadDim}, 2).narrow(2, 0, length)};
  }
}

// Args: kv length, cache layout, threads.
void BM_DecodeAttention(benchmark::State& state) {
  int64_t length = state.range(0);
  int64_t layout = state.range(1);
  set_num_threads(static_cast<int>(state.range(2)));
  auto [key, value] = make_cache(layout, length);
  Tensor query = randn({1, kQueryHeads, 1, kHeadDim}, 3);
  double scale = 1.0 / std::sqrt(double(kHeadDim));
  for (auto _ : state) {
    Tensor result = attention(query, key, value, scale, true);
    benchmark::DoNotOptimize(result.raw());
  }
  double kv_bytes = 2.0 * kKvHeads * length * kHeadDim * sizeof(float);
  // Scores and the weighted sum of V: two multiply-adds per (query head, key, dim).
  double flops = 2.0 * 2.0 * kQueryHeads * length * kHeadDim;
  state.counters["GB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(concat(layout_name(layout), ", ", cpu::isa_name(cpu::active_isa())));
}

// Args: prompt length, threads.
void BM_PrefillAttention(benchmark::State& state) {
  int64_t length = state.range(0);
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor query = randn({1, kQueryHeads, length, kHeadDim}, 3);
  Tensor key = randn({1, kKvHeads, length, kHeadDim}, 1);
  Tensor value = randn({1, length, kKvHeads, kHeadDim}, 2).transpose(1, 2);
  double scale = 1.0 / std::sqrt(double(kHeadDim));
  for (auto _ : state) {
    Tensor result = attention(query, key, value, scale, true);
    benchmark::DoNotOptimize(result.raw());
  }
  // Two matrix products (scores and the weighted sum of V) over the causal half.
  double flops = 2.0 * 2.0 * kQueryHeads * kHeadDim * (length * (length + 1) / 2.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(cpu::isa_name(cpu::active_isa()));
}

void decode_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int64_t threads : {1, 2}) {
    for (int64_t length : {513, 2049}) {
      for (int64_t layout : {kContiguous, kTransposedValue, kNarrowedPrealloc}) {
        benchmark->Args({length, layout, threads});
      }
    }
  }
  benchmark->ArgNames({"kv_len", "layout", "threads"});
}

BENCHMARK(BM_DecodeAttention)->Apply(decode_arguments)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttention)
    ->Args({513, 1})
    ->Args({513, 2})
    ->Args({2049, 1})
    ->Args({2049, 2})
    ->ArgNames({"length", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fornace
