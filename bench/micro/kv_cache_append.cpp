// One KV-cache append (one layer's V, Qwen2.5-0.5B: 2 KV heads, head_dim 64) by Candle's two
// ways: cat of the cache and the new position into a new tensor, or slice_set of the new position
// (after contiguous(), which slice_set needs) into a preallocated buffer. Inputs contiguous, or
// laid out as a transposed view (V as the projection leaves it, and a cat cache built from it).
// 24 caches are used in turn so that they come from memory, as in a decode step. Medians of
// --benchmark_repetitions on a shared machine.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/error.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace {
namespace {

constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kLayers = 24;

enum Method : int64_t { kCat = 0, kSliceSet = 1 };

// `length` positions of V, [1, H, S, D]: contiguous, or a [1, S, H, D] tensor transposed.
Tensor values(int64_t length, bool transposed, DType dtype, uint64_t seed) {
  if (!transposed) return randn({1, kKvHeads, length, kHeadDim}, seed, 1.0, dtype);
  return randn({1, length, kKvHeads, kHeadDim}, seed, 1.0, dtype).transpose(1, 2);
}

// Args: positions before the append, method, transposed inputs, bf16.
void BM_KvCacheAppend(benchmark::State& state) {
  const int64_t length = state.range(0);
  const auto method = static_cast<Method>(state.range(1));
  const bool transposed = state.range(2) != 0;
  const DType dtype = state.range(3) ? DType::bf16 : DType::f32;
  std::vector<Tensor> caches;
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    caches.push_back(method == kCat ? values(length, transposed, dtype, 10 + layer)
                                    : zeros({1, kKvHeads, length + 1, kHeadDim}, dtype));
  }
  Tensor added = values(1, transposed, dtype, 3);
  size_t layer = 0;
  for (auto _ : state) {
    const Tensor& cache = caches[layer];
    layer = (layer + 1) % caches.size();
    if (method == kCat) {
      Tensor grown = cat({cache, added}, 2);
      benchmark::DoNotOptimize(grown.raw());
    } else {
      slice_set(cache, contiguous(added), 2, length);
      benchmark::DoNotOptimize(cache.raw());
    }
  }
  // Bytes written per append: the whole grown cache for cat, one position for slice_set.
  const double written = (method == kCat ? length + 1 : 1) * kKvHeads * kHeadDim *
                         static_cast<double>(dtype_size(dtype));
  state.counters["written_bytes"] = written;
  state.counters["GB/s"] =
      benchmark::Counter(written * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(concat(method == kCat ? "cat" : "slice_set", ", ",
                        transposed ? "transposed-view" : "contiguous", " inputs, ",
                        dtype_name(dtype)));
}

void append_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int64_t dtype : {0, 1}) {
    for (int64_t length : {513, 2049}) {
      for (int64_t transposed : {0, 1}) {
        for (int64_t method : {kCat, kSliceSet}) benchmark->Args({length, method, transposed, dtype});
      }
    }
  }
  benchmark->ArgNames({"positions", "slice_set", "transposed", "bf16"});
}

BENCHMARK(BM_KvCacheAppend)->Apply(append_arguments)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fornace
