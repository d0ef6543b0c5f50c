// Attention microbenchmarks: Qwen2.5-0.5B decode (Sq 1, 14 query heads, 2 kv heads, D 64) over
// the three KV cache layouts, reported as µs per call, GB/s of K and V read and GFLOP/s; causal
// prefill (the model's layouts: Q contiguous, K contiguous, V a transposed view) as GFLOP/s, on
// those heads and on Gemma 3 270M's (4 query heads, 1 kv head, D 256).
// Each with an f32 cache and a bf16 one (the model's cache for bf16 weights: vdpbf16ps
// products). BM_DecodeAttentionCacheType: the same decode at 2,048 and 16,384 keys for each
// --cache-type (f32, f16, bf16, q8_0, q4_0; a prealloc cache's contiguous K and V).
// On a shared machine take medians of --benchmark_repetitions.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <vector>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/math.h"
#include "ops/quantized.h"

namespace fornace {
namespace {

constexpr int64_t kQueryHeads = 14;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kCapacity = 4096;  // Positions in the preallocated cache.
constexpr int64_t kLayers = 24;

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

// The cache dtype argument: 0 is f32, 1 is bf16.
DType cache_dtype(int64_t argument) { return argument ? DType::bf16 : DType::f32; }

// K and V of `length` positions as each KV cache kind hands them to attention.
std::pair<Tensor, Tensor> make_cache(int64_t layout, int64_t length, DType dtype) {
  auto values = [dtype](const Dims& shape, uint64_t seed) {
    return randn(shape, seed, 1.0, dtype);
  };
  switch (layout) {
    case kContiguous:
      return {values({1, kKvHeads, length, kHeadDim}, 1), values({1, kKvHeads, length, kHeadDim}, 2)};
    case kTransposedValue:
      // cat keeps K contiguous (RoPE writes it) and V as [B, S, H, D] viewed as [B, H, S, D].
      return {values({1, kKvHeads, length, kHeadDim}, 1),
              values({1, length, kKvHeads, kHeadDim}, 2).transpose(1, 2)};
    default:
      return {values({1, kKvHeads, kCapacity, kHeadDim}, 1).narrow(2, 0, length),
              values({1, kKvHeads, kCapacity, kHeadDim}, 2).narrow(2, 0, length)};
  }
}

// Args: kv length, cache layout, threads, cache dtype.
void BM_DecodeAttention(benchmark::State& state) {
  int64_t length = state.range(0);
  int64_t layout = state.range(1);
  set_num_threads(static_cast<int>(state.range(2)));
  DType dtype = cache_dtype(state.range(3));
  // One cache per layer of the model, used in turn, so that K and V come from memory as they do
  // in a decode step (a single cache would stay in L2).
  std::vector<std::pair<Tensor, Tensor>> layers;
  for (int64_t layer = 0; layer < kLayers; ++layer) layers.push_back(make_cache(layout, length, dtype));
  Tensor query = randn({1, kQueryHeads, 1, kHeadDim}, 3);
  double scale = 1.0 / std::sqrt(double(kHeadDim));
  size_t layer = 0;
  for (auto _ : state) {
    const auto& [key, value] = layers[layer];
    layer = (layer + 1) % layers.size();
    Tensor result = attention(query, key, value, scale, true);
    benchmark::DoNotOptimize(result.raw());
  }
  double kv_bytes = 2.0 * kKvHeads * length * kHeadDim * dtype_size(dtype);
  // Scores and the weighted sum of V: two multiply-adds per (query head, key, dim).
  double flops = 2.0 * 2.0 * kQueryHeads * length * kHeadDim;
  state.counters["GB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(concat(layout_name(layout), ", ", dtype_name(dtype), " cache, ",
                        cpu::isa_name(cpu::active_isa())));
}

// The cache types of BM_DecodeAttentionCacheType, by argument.
constexpr BlockType kCacheTypes[] = {BlockType::f32, BlockType::f16, BlockType::bf16,
                                     BlockType::q8_0, BlockType::q4_0};

// K or V of `length` positions as a cache of `type` holds them.
Tensor cache_rows(BlockType type, int64_t length, uint64_t seed) {
  Dims shape{1, kKvHeads, length, kHeadDim};
  switch (type) {
    case BlockType::q8_0:
    case BlockType::q4_0:
      return quantize_rows(randn(shape, seed), type);
    case BlockType::f16:
      return randn(shape, seed, 1.0, DType::f16);
    case BlockType::bf16:
      return randn(shape, seed, 1.0, DType::bf16);
    default:
      return randn(shape, seed);
  }
}

// The last-level cache's size as the OS reports it (0 where it does not).
int64_t last_level_cache_bytes() {
  const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return bytes > 0 ? bytes : 0;
}

// Args: kv length, cache type (kCacheTypes), threads.
void BM_DecodeAttentionCacheType(benchmark::State& state) {
  const int64_t length = state.range(0);
  const BlockType type = kCacheTypes[state.range(1)];
  set_num_threads(static_cast<int>(state.range(2)));
  const std::optional<BlockType> blocks =
      is_quantized(type) ? std::optional<BlockType>(type) : std::nullopt;
  // Caches of several layers used in turn, so that K and V come from memory: the model's 24
  // layers, or more, up to twice the last-level cache (480 MiB reported on one Intel VM), as
  // copies of two random layers.
  const Tensor first_key = cache_rows(type, length, 10);
  const Tensor first_value = cache_rows(type, length, 11);
  const int64_t layer_bytes = 2 * first_key.numel() * first_key.element_size();
  const int64_t layers = std::max(kLayers, 2 * last_level_cache_bytes() / layer_bytes + 1);
  std::vector<std::pair<Tensor, Tensor>> caches;
  for (int64_t layer = 0; layer < layers; ++layer) {
    caches.emplace_back(Tensor::empty(first_key.shape(), first_key.dtype()),
                        Tensor::empty(first_value.shape(), first_value.dtype()));
    copy_into(caches.back().first, first_key);
    copy_into(caches.back().second, first_value);
  }
  Tensor query = randn({1, kQueryHeads, 1, kHeadDim}, 3);
  double scale = 1.0 / std::sqrt(double(kHeadDim));
  size_t layer = 0;
  for (auto _ : state) {
    const auto& [key, value] = caches[layer];
    layer = (layer + 1) % caches.size();
    Tensor result = attention(query, key, value, scale, true, 0, blocks);
    benchmark::DoNotOptimize(result.raw());
  }
  const Tensor& key = caches[0].first;
  double kv_bytes = 2.0 * static_cast<double>(key.numel() * key.element_size());
  state.counters["GB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes/pos"] = static_cast<double>(kv_bytes) / static_cast<double>(length);
  state.SetLabel(concat(block_format(type).name, " cache, ", cpu::isa_name(cpu::active_isa())));
}

// Heads of a prefill attention: Qwen2.5-0.5B's, or Gemma 3 270M's (fewer, wider heads).
struct HeadShape {
  int64_t query_heads;
  int64_t kv_heads;
  int64_t head_dim;
};
constexpr HeadShape kPrefillHeads[] = {{kQueryHeads, kKvHeads, kHeadDim}, {4, 1, 256}};

// Args: prompt length, threads, cache dtype, head shape (0 Qwen2.5-0.5B, 1 Gemma 3 270M).
void BM_PrefillAttention(benchmark::State& state) {
  int64_t length = state.range(0);
  set_num_threads(static_cast<int>(state.range(1)));
  DType dtype = cache_dtype(state.range(2));
  const auto [query_heads, kv_heads, head_dim] = kPrefillHeads[state.range(3)];
  Tensor query = randn({1, query_heads, length, head_dim}, 3);
  Tensor key = randn({1, kv_heads, length, head_dim}, 1, 1.0, dtype);
  Tensor value = randn({1, length, kv_heads, head_dim}, 2, 1.0, dtype).transpose(1, 2);
  double scale = 1.0 / std::sqrt(double(head_dim));
  for (auto _ : state) {
    Tensor result = attention(query, key, value, scale, true);
    benchmark::DoNotOptimize(result.raw());
  }
  // Two matrix products (scores and the weighted sum of V) over the causal half.
  double flops = 2.0 * 2.0 * query_heads * head_dim * (length * (length + 1) / 2.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(concat(dtype_name(dtype), " cache, ", cpu::isa_name(cpu::active_isa())));
}

void decode_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int64_t dtype : {0, 1}) {
    for (int64_t threads : {1, 2}) {
      for (int64_t length : {513, 2049}) {
        for (int64_t layout : {kContiguous, kTransposedValue, kNarrowedPrealloc}) {
          benchmark->Args({length, layout, threads, dtype});
        }
      }
    }
  }
  benchmark->ArgNames({"kv_len", "layout", "threads", "bf16"});
}

void prefill_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int64_t dtype : {0, 1}) {
    for (int64_t length : {513, 2049}) {
      for (int64_t threads : {1, 2}) {
        for (int64_t heads : {0, 1}) benchmark->Args({length, threads, dtype, heads});
      }
    }
  }
  benchmark->ArgNames({"length", "threads", "bf16", "gemma3"});
}

BENCHMARK(BM_DecodeAttention)->Apply(decode_arguments)->UseRealTime()->Unit(benchmark::kMicrosecond);
void cache_type_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int64_t threads : {1, 2}) {
    for (int64_t length : {2048, 16384}) {
      for (int64_t type = 0; type < static_cast<int64_t>(std::size(kCacheTypes)); ++type) {
        benchmark->Args({length, type, threads});
      }
    }
  }
  benchmark->ArgNames({"kv_len", "type", "threads"});
}

BENCHMARK(BM_DecodeAttentionCacheType)
    ->Apply(cache_type_arguments)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttention)
    ->Apply(prefill_arguments)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fornace
