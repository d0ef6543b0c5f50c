// Block-format dot_rows on one thread over weights that do not fit in cache (and, as `cached`, over
// one copy left in L2 or L3): weight GB/s and int8 GOP/s for 1 and 4 activation rows, per type and
// ISA (plus dot_rows_f32). The K-quants, and the legacy types of a Q4_K_M file.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/block_type.h"
#include "core/dtype.h"
#include "cpu/cpu_features.h"
#include "cpu/quant.h"
#include "range_statistics.h"

namespace {

using fornace::BlockType;
using fornace::cpu::Isa;

struct Shape {
  const char* name;
  int64_t rows;   // Outputs.
  int64_t depth;  // Elements per weight row.
};

constexpr Shape kShapes[] = {
    {"ffn_down_896x4864", 896, 4864},
    {"1536x1536", 1536, 1536},
    {"2048x2048", 2048, 2048},
    {"l2_384x1024", 384, 1024},  // Fits in L2 (Q8_0: 408 KiB) as `cached`.
};

// Calls cycle through copies of the weights whose total exceeds the last-level cache.
constexpr int64_t kMinWeightFootprint = int64_t{256} << 20;

using fornace::micro::minimum;

// Random bytes with f16 d and dmin of realistic size (speed does not depend on the values).
std::vector<uint8_t> random_weights(BlockType type, size_t bytes) {
  const size_t block_bytes = fornace::block_format(type).block_bytes;
  std::vector<uint8_t> weights(bytes);
  std::mt19937 generator(1);
  for (uint8_t& byte : weights) byte = static_cast<uint8_t>(generator());
  const uint16_t d = fornace::f32_to_f16(0.001f);
  for (size_t offset = 0; offset < bytes; offset += block_bytes) {
    std::memcpy(&weights[offset + (type == BlockType::q6_k ? 208 : 0)], &d, 2);
    if (type != BlockType::q6_k) std::memcpy(&weights[offset + 2], &d, 2);
  }
  return weights;
}

void run_dot(benchmark::State& state, BlockType type, const Shape& shape, int64_t columns, Isa isa,
             bool f32_activations, bool from_cache) {
  if (fornace::cpu::detected_isa() < isa) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const fornace::cpu::BlockKernels& kernels = fornace::cpu::block_kernels(type, isa);
  const size_t row_bytes = fornace::block_row_bytes(type, shape.depth);
  const size_t matrix_bytes = row_bytes * shape.rows;
  const int64_t copies =
      from_cache ? 1 : std::max<int64_t>(1, kMinWeightFootprint / matrix_bytes + 1);
  std::vector<uint8_t> weights = random_weights(type, matrix_bytes);
  weights.resize(matrix_bytes * copies);
  for (int64_t copy = 1; copy < copies; ++copy) {
    std::memcpy(weights.data() + copy * matrix_bytes, weights.data(), matrix_bytes);
  }

  std::vector<float> activations(columns * shape.depth);
  std::mt19937 generator(2);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& value : activations) value = normal(generator);
  const size_t activation_row_bytes = kernels.activation_row_bytes(shape.depth);
  std::vector<uint8_t> rounded(columns * activation_row_bytes);
  for (int64_t c = 0; c < columns; ++c) {
    kernels.quantize_activations(activations.data() + c * shape.depth,
                                 rounded.data() + c * activation_row_bytes, shape.depth);
  }
  std::vector<float> out(columns * shape.rows);

  int64_t copy = 0;
  for (auto _ : state) {
    const uint8_t* matrix = weights.data() + copy * matrix_bytes;
    copy = (copy + 1) % copies;
    if (f32_activations) {
      kernels.dot_rows_f32(matrix, row_bytes, shape.rows, activations.data(), shape.depth, columns,
                           shape.depth, out.data(), shape.rows);
    } else {
      kernels.dot_rows(matrix, row_bytes, shape.rows, rounded.data(), activation_row_bytes, columns,
                       shape.depth, out.data(), shape.rows);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(matrix_bytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * columns * shape.rows * shape.depth * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fornace::cpu::isa_name(isa));
}

// KDot/<type>/<shape>/columns:<C>/<isa>[/f32][/cached]: int8 activations at 1 and 4 columns on
// avx512 and avx2, portable at 1, f32 activations at 1, and avx512 and avx2 on weights left in
// cache.
const bool kRegistered = [] {
  struct Variant {
    Isa isa;
    int64_t columns;
    bool f32;
    bool from_cache = false;  // One copy of the weights, read from L2/L3: the kernel's own speed.
  };
  const Variant variants[] = {
      {Isa::avx512, 1, false}, {Isa::avx512, 4, false},       {Isa::avx2, 1, false},
      {Isa::avx2, 4, false},   {Isa::portable, 1, false},     {Isa::avx512, 1, true},
      {Isa::avx2, 1, true},    {Isa::avx512, 1, false, true}, {Isa::avx512, 4, false, true},
      {Isa::avx2, 1, false, true}};
  for (BlockType type : {BlockType::q4_k, BlockType::q5_k, BlockType::q6_k, BlockType::q5_0,
                         BlockType::q8_0, BlockType::q4_0}) {
    for (const Shape& shape : kShapes) {
      for (const Variant& variant : variants) {
        const std::string name = std::string("KDot/") + fornace::block_format(type).name + "/" +
                                 shape.name + "/columns:" + std::to_string(variant.columns) + "/" +
                                 fornace::cpu::isa_name(variant.isa) + (variant.f32 ? "/f32" : "") +
                                 (variant.from_cache ? "/cached" : "");
        benchmark::RegisterBenchmark(name.c_str(),
                                     [type, shape, variant](benchmark::State& state) {
                                       run_dot(state, type, shape, variant.columns, variant.isa,
                                               variant.f32, variant.from_cache);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->ComputeStatistics("min", minimum);
      }
    }
  }
  return true;
}();

}  // namespace
